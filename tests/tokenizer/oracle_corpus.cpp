#include "tests/tokenizer/oracle_corpus.h"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace nibble::tokenizer::testing {

std::string source_dir() {
  const char* dir = std::getenv("NIBBLE_SOURCE_DIR");
  return dir ? dir : NIBBLE_TEST_SOURCE_DIR;
}

std::vector<std::string> load_oracle_corpus() {
  const std::string path = source_dir() + "/tests/oracle/tokenizer/corpus.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::vector<std::string> texts;
  for (const auto& entry : nlohmann::json::parse(buffer.str())) {
    if (entry.is_string()) {
      texts.push_back(entry.get<std::string>());
      continue;
    }
    const std::string hex = entry.at("hex").get<std::string>();
    std::string bytes;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
      bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    texts.push_back(bytes);
  }
  return texts;
}

}  // namespace nibble::tokenizer::testing

#include "controller/recipe/yaml_documents.h"

#include <sstream>

namespace nibble::recipe {
namespace {

bool is_separator(const std::string& line) {
  if (line.compare(0, 3, "---") != 0) return false;
  const std::size_t rest = line.find_first_not_of(" \t\r", 3);
  return rest == std::string::npos || line[rest] == '#';
}

bool has_content(const std::string& doc) {
  std::istringstream in(doc);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t at = line.find_first_not_of(" \t\r");
    if (at != std::string::npos && line[at] != '#') return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> split_yaml_documents(const std::string& text) {
  std::vector<std::string> docs;
  std::string current;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line == "..." || is_separator(line)) {
      if (has_content(current)) docs.push_back(current);
      current.clear();
      continue;
    }
    current += line + "\n";
  }
  if (has_content(current)) docs.push_back(current);
  return docs;
}

}  // namespace nibble::recipe

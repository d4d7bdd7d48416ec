// nibble-engine tokenize: text on stdin -> JSON array of token ids (or back with --decode),
// using the model directory's tokenizer.json.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/cli/commands.h"
#include "engine/tokenizer/tokenizer.h"

namespace nibble::engine::cli {
namespace {

constexpr const char* kUsage =
    "usage: nibble-engine tokenize --model DIR [--add-special-tokens] [--decode] "
    "[--skip-special-tokens]\n"
    "\n"
    "Reads UTF-8 text on stdin and prints the JSON array of token ids.\n"
    "  --model DIR            directory with tokenizer.json (and tokenizer_config.json)\n"
    "  --add-special-tokens   add the post-processor's special tokens (e.g. BOS), as in "
    "transformers\n"
    "  --decode               read a JSON array of ids on stdin and print the text instead\n"
    "  --skip-special-tokens  with --decode: leave special tokens out of the text\n";

}  // namespace

int run_tokenize(const Args& args) {
  std::string model_dir;
  bool add_special = false, decode = false, skip_special = false;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--model" && i + 1 < args.size()) {
      model_dir = args[++i];
    } else if (a == "--add-special-tokens") {
      add_special = true;
    } else if (a == "--decode") {
      decode = true;
    } else if (a == "--skip-special-tokens") {
      skip_special = true;
    } else {
      std::fprintf(stderr, "tokenize: unknown or incomplete option '%s'\n\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (model_dir.empty()) {
    std::fprintf(stderr, "tokenize: --model DIR is required\n\n%s", kUsage);
    return 2;
  }
  const auto tokenizer = tokenizer::Tokenizer::from_directory(model_dir);
  const std::string input{std::istreambuf_iterator<char>(std::cin),
                          std::istreambuf_iterator<char>()};
  if (!decode) {
    const auto ids = tokenizer.encode(input, {.add_special_tokens = add_special});
    std::printf("%s\n", nlohmann::json(ids).dump().c_str());
    return 0;
  }
  const auto json = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (!json.is_array() ||
      !std::all_of(json.begin(), json.end(), [](const auto& v) { return v.is_number_integer(); })) {
    std::fprintf(stderr, "tokenize --decode: stdin must be a JSON array of integer token ids\n");
    return 2;
  }
  const auto text = tokenizer.decode(json.get<std::vector<tokenizer::TokenId>>(),
                                     {.skip_special_tokens = skip_special});
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace nibble::engine::cli

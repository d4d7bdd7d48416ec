// nibble-engine render-chat: a chat request (JSON on stdin) -> the prompt the model's own chat
// template renders, printed exactly (no trailing newline added).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/chat/chat_template.h"
#include "engine/cli/commands.h"

namespace nibble::engine::cli {
namespace {

constexpr const char* kRenderChatUsage =
    "usage: nibble-engine render-chat --model DIR\n"
    "\n"
    "Reads a JSON object on stdin and prints the prompt rendered by the model's chat template\n"
    "(tokenizer_config.json \"chat_template\"), exactly as transformers' apply_chat_template:\n"
    "  {\"messages\": [...], \"add_generation_prompt\": true, \"tools\": [...], ...extra}\n"
    "Extra keys (e.g. \"enable_thinking\": false) become template variables.\n"
    "  --model DIR   directory with tokenizer_config.json (a chat_template.jinja there wins)\n";

}  // namespace

int run_render_chat(const Args& args) {
  std::string model_dir;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::fputs(kRenderChatUsage, stdout);
      return 0;
    } else if (args[i] == "--model" && i + 1 < args.size()) {
      model_dir = args[++i];
    } else {
      std::fprintf(stderr, "render-chat: unknown or incomplete option '%s'\n\n%s", args[i].c_str(),
                   kRenderChatUsage);
      return 2;
    }
  }
  if (model_dir.empty()) {
    std::fprintf(stderr, "render-chat: --model DIR is required\n\n%s", kRenderChatUsage);
    return 2;
  }
  const chat::ChatTemplate chat_template(chat::load_tokenizer_config(model_dir));
  const std::string input{std::istreambuf_iterator<char>(std::cin),
                          std::istreambuf_iterator<char>()};
  nlohmann::ordered_json body;
  try {
    body = nlohmann::ordered_json::parse(input);
  } catch (const nlohmann::ordered_json::parse_error& e) {
    std::fprintf(stderr, "render-chat: stdin is not valid JSON: %s\n", e.what());
    return 2;
  }
  const std::string prompt = chat_template.render(chat::parse_chat_request(body));
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  return 0;
}

}  // namespace nibble::engine::cli

#include "controller/source/hub_files.h"

#include <array>
#include <string_view>

namespace nibble::source {

namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace

bool is_needed_for_serving(const std::string& rfilename) {
  static constexpr std::array<std::string_view, 12> kExact = {"config.json",
                                                              "generation_config.json",
                                                              "model.safetensors.index.json",
                                                              "tokenizer.json",
                                                              "tokenizer_config.json",
                                                              "special_tokens_map.json",
                                                              "chat_template.jinja",
                                                              "chat_template.json",
                                                              "hf_quant_config.json",
                                                              "tokenizer.model",
                                                              "vocab.json",
                                                              "merges.txt"};
  if (rfilename.find('/') != std::string::npos) return false;
  for (std::string_view name : kExact) {
    if (rfilename == name) return true;
  }
  return ends_with(rfilename, ".safetensors");
}

bool is_safe_relative_path(const std::string& rfilename) {
  if (rfilename.empty() || rfilename.front() == '/') return false;
  if (rfilename.find('\\') != std::string::npos) return false;
  if (rfilename.find('\0') != std::string::npos) return false;
  std::string_view rest = rfilename;
  while (true) {
    const size_t slash = rest.find('/');
    const std::string_view part = rest.substr(0, slash);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string_view::npos) return true;
    rest.remove_prefix(slash + 1);
  }
}

std::string percent_encode(const std::string& text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
                            c == '~' || (keep_slash && c == '/');
    if (unreserved) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

}  // namespace nibble::source

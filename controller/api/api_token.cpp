#include "controller/api/api_token.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "http/api_keys.h"

namespace nibble::controller {
namespace {

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return {};
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

}  // namespace

std::string default_api_token_path(const std::string& state_dir) {
  return (std::filesystem::path(state_dir) / "api-token").string();
}

std::string load_or_create_api_token(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    const std::string token = first_line(path);
    if (token.empty()) throw std::runtime_error("the API token file " + path + " is empty");
    return token;
  }
  const std::string token = http::generate_api_key();
  http::write_private_file(path, token + "\n");
  return token;
}

std::string cli_api_token() {
  if (const char* env = std::getenv("NIBBLE_API_TOKEN"); env != nullptr && *env != '\0') return env;
  const char* state = std::getenv("NIBBLE_STATE_DIR");
  const char* home = std::getenv("HOME");
  const std::string dir =
      state != nullptr && *state != '\0'
          ? std::string(state)
          : std::string(home != nullptr ? home : "/tmp") + "/.local/state/nibble";
  return first_line(default_api_token_path(dir));
}

}  // namespace nibble::controller

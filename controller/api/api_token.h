#pragma once
// The controller API's bearer token. It lives in the state directory (`api-token`, readable by
// its owner only) so that the `nibble` CLI of the same user finds it without a flag;
// $NIBBLE_API_TOKEN overrides it for the CLI.
#include <string>

namespace nibble::controller {

// <state_dir>/api-token
std::string default_api_token_path(const std::string& state_dir);

// The token in `path`, created (random, mode 0600) when the file does not exist. Throws
// std::runtime_error naming the file when it cannot be read or written.
std::string load_or_create_api_token(const std::string& path);

// What the CLI sends: $NIBBLE_API_TOKEN, else the first line of the default state directory's
// token file ($NIBBLE_STATE_DIR or ~/.local/state/nibble), else "" (no Authorization header).
std::string cli_api_token();

}  // namespace nibble::controller

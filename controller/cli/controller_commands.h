#pragma once
// The `nibble` commands that talk to a running nibble-controller through its local API
// (controller/api/api_server.h): apply, get (-o, -w), describe, delete, scale, wait, logs (-f,
// -p). The controller's URL comes from --controller, else $NIBBLE_CONTROLLER, else
// http://127.0.0.1:8001. Usage texts are in command_usage.h.
#include <string>
#include <vector>

namespace nibble::cli {

// args: everything after the command name. Returns the process exit status.
int run_apply(const std::vector<std::string>& args);
int run_get(const std::vector<std::string>& args);
int run_describe(const std::vector<std::string>& args);
int run_delete(const std::vector<std::string>& args);
int run_wait(const std::vector<std::string>& args);
int run_logs(const std::vector<std::string>& args);
int run_scale(const std::vector<std::string>& args);

}  // namespace nibble::cli

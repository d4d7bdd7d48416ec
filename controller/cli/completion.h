#pragma once
// `nibble completion bash`: a bash completion script made from the command table
// (command_usage.h): commands, each command's flags, -o formats, files after -f, and recipe
// names, which it asks the controller for with `nibble get recipes -o name`.
#include <string>

namespace nibble::cli {

std::string bash_completion();

}  // namespace nibble::cli

#pragma once
// The `nibble` commands in one table: what `nibble --help` lists, what `nibble COMMAND --help`
// prints, and the flags `nibble completion bash` offers. A command missing here is unknown to
// all three.
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nibble::cli {

struct CommandUsage {
  std::string_view name;
  std::string_view synopsis;     // after "nibble ": "get recipes [NAME...] [-o FORMAT] [-w]"
  std::string_view description;  // lines of "  text"; flags described as "  -w, --watch  text"
  bool needs_controller;         // goes through nibble-controller's API
};

std::span<const CommandUsage> commands();
// nullptr when there is no such command.
const CommandUsage* find_command(std::string_view name);

// `nibble --help`: every command's synopsis and description, grouped by where it runs.
std::string nibble_usage();
// `nibble COMMAND --help`.
std::string command_usage(const CommandUsage& command);
// The long and short flags (words starting with '-') that the command's usage names, in order,
// each once: what completion offers after the command.
std::vector<std::string> command_flags(const CommandUsage& command);

}  // namespace nibble::cli

#pragma once
// The nibble-engine subcommands. Each takes the arguments after its name
// (args[0] is the subcommand) and returns the process exit code.
#include <string>
#include <vector>

namespace nibble::engine::cli {

using Args = std::vector<std::string>;

int run_generate(const Args& args);
int run_render_chat(const Args& args);
int run_serve(const Args& args);
int run_tokenize(const Args& args);
int run_version(const Args& args);

}  // namespace nibble::engine::cli

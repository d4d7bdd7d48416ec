// nibble-engine: serves NVFP4 language models. One subcommand per job; see --help.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "engine/cli/commands.h"

namespace {

using nibble::engine::cli::Args;

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(const Args&);
};

// Add new subcommands here, one line each, sorted by name.
constexpr Subcommand kSubcommands[] = {
    {"generate", "greedy decoding from token ids (CPU reference)",
     nibble::engine::cli::run_generate},
    {"render-chat", "chat messages (JSON) to the model's prompt",
     nibble::engine::cli::run_render_chat},
    {"serve", "serve the model over the OpenAI-compatible HTTP API",
     nibble::engine::cli::run_serve},
    {"tokenize", "text to token ids (or back with --decode)", nibble::engine::cli::run_tokenize},
    {"version", "print the version", nibble::engine::cli::run_version},
};

void print_usage() {
  std::printf("usage: nibble-engine <command> [options]\n\ncommands:\n");
  for (const auto& c : kSubcommands) std::printf("  %-14s %s\n", c.name, c.summary);
  std::printf("\n'nibble-engine <command> --help' describes a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) return nibble::engine::cli::run_version({});
  Args args(argv + 1, argv + argc);
  // --help anywhere after the command shows its usage, whatever else is on the line (kubectl's
  // habit): `serve --port x --help` is help, not an error about the port.
  if (std::find_if(args.begin() + 1, args.end(),
                   [](const std::string& a) { return a == "--help" || a == "-h"; }) != args.end()) {
    args = {args[0], "--help"};
  }
  for (const auto& c : kSubcommands) {
    if (args[0] == c.name) {
      try {
        return c.run(args);
      } catch (const std::exception& e) {
        spdlog::error("{}: {}", c.name, e.what());
        return 1;
      }
    }
  }
  std::fprintf(stderr, "nibble-engine: unknown command '%s'\n\n", argv[1]);
  print_usage();
  return 2;
}

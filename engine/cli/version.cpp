#include <cstdio>

#include "engine/cli/commands.h"

namespace nibble::engine::cli {

int run_version(const Args& args) {
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::printf("usage: nibble-engine version\n\nPrints the engine's version.\n");
      return 0;
    }
    std::fprintf(stderr, "version: unexpected argument '%s' (see --help)\n", args[i].c_str());
    return 2;
  }
  std::printf("nibble-engine %s\n", NIBBLE_VERSION);
  return 0;
}

}  // namespace nibble::engine::cli

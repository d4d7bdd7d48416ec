#include <cstdio>

#include "engine/cli/commands.h"

namespace nibble::engine::cli {

int run_version(const Args&) {
  std::printf("nibble-engine %s\n", NIBBLE_VERSION);
  return 0;
}

}  // namespace nibble::engine::cli

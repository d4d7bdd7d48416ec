#pragma once
// The last lines of an engine's log file, for `nibble logs`. Reads at most the final 1 MiB, so
// a long-running engine's large log costs the same as a short one.
#include <filesystem>
#include <string>

namespace nibble::controller {

// Up to `lines` final lines of the file (each ending in '\n'); "" when it cannot be read.
std::string tail_lines(const std::filesystem::path& file, int lines);

}  // namespace nibble::controller

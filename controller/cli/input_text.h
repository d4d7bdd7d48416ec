#pragma once
// The whole text of a file named on the command line, `-` meaning stdin (kubectl's -f -).
#include <string>

namespace nibble::cli {

// False when the file cannot be opened.
bool read_input(const std::string& path, std::string& out);

}  // namespace nibble::cli

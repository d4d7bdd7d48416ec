#include "controller/cli/input_text.h"

#include <fstream>
#include <iostream>
#include <sstream>

namespace nibble::cli {

bool read_input(const std::string& path, std::string& out) {
  std::stringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(path);
    if (!in) return false;
    text << in.rdbuf();
  }
  out = text.str();
  return true;
}

}  // namespace nibble::cli

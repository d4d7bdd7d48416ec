#pragma once
// Every way the streaming parsers' tests cut a text: k-byte chunks for every k from 1 to the
// whole text, and every single cut into two pieces.
#include <string>
#include <vector>

namespace nibble::testing {

inline std::vector<std::vector<std::string>> chunk_splits(const std::string& text) {
  std::vector<std::vector<std::string>> splits;
  for (std::size_t k = 1; k <= std::max<std::size_t>(1, text.size()); ++k) {
    std::vector<std::string> chunks;
    for (std::size_t i = 0; i < text.size(); i += k) chunks.push_back(text.substr(i, k));
    splits.push_back(chunks);
  }
  for (std::size_t cut = 1; cut < text.size(); ++cut) {
    splits.push_back({text.substr(0, cut), text.substr(cut)});
  }
  return splits;
}

}  // namespace nibble::testing

#include "engine/text/partial_marker.h"

#include <algorithm>

namespace nibble::text {

std::size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
  if (marker.empty()) return 0;
  for (std::size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

std::size_t partial_marker_suffix(std::string_view text,
                                  std::initializer_list<std::string_view> markers) {
  std::size_t held = 0;
  for (std::string_view m : markers) held = std::max(held, partial_marker_suffix(text, m));
  return held;
}

}  // namespace nibble::text

#pragma once
// Streaming parsers hold back text that may be the start of a marker ("<tool_call>", "</think>")
// until the next bytes decide it. This says how much of a buffer's end must be held.
#include <cstddef>
#include <initializer_list>
#include <string_view>

namespace nibble::text {

// Length of the longest suffix of `text` that is a proper, non-empty prefix of `marker`
// (0 when the end of `text` cannot grow into the marker).
std::size_t partial_marker_suffix(std::string_view text, std::string_view marker);

// The largest partial_marker_suffix over several markers.
std::size_t partial_marker_suffix(std::string_view text,
                                  std::initializer_list<std::string_view> markers);

}  // namespace nibble::text

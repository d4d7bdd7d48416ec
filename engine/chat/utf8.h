#pragma once
// UTF-8 <-> code points for the string operations Python does per character
// (len, indexing, slicing, strip). Invalid bytes decode as U+FFFD.
#include <string>
#include <string_view>

namespace nibble::chat {

std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t cp);
// Python's str.isspace() for one code point.
bool is_python_space(char32_t cp);

}  // namespace nibble::chat

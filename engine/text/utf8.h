#pragma once
// UTF-8 helpers shared by the tokenizer and the chat templates: decoding with replacement
// (the maximal-subpart rule), encoding, and finding where a byte stream stops being complete
// (for streaming detokenization).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace nibble::text {

// Returns `bytes` with every ill-formed subsequence replaced by U+FFFD, using the
// "maximal subpart" rule of the WHATWG/Unicode decoders (what JS TextDecoder does), so
// invalid input tokenizes exactly like the JS tokenizers that see the decoded string.
std::string sanitize_utf8(std::string_view bytes);

// Appends the UTF-8 encoding of a code point.
void append_utf8(std::string& out, char32_t cp);

// Decodes valid UTF-8 (call sanitize_utf8 first) into code points.
std::vector<char32_t> decode_utf8(std::string_view text);

// Byte length of the UTF-8 sequence that starts with `lead` (1 for invalid leads).
std::size_t utf8_sequence_length(unsigned char lead);

// Any bytes → code points (ill-formed parts become U+FFFD), and back: the per-character view
// Python's str methods need.
std::u32string to_code_points(std::string_view bytes);
std::string from_code_points(std::u32string_view code_points);

// Length of the longest prefix of `bytes` that does not end inside an incomplete (but so far
// valid) UTF-8 sequence. Bytes after it may still be completed by more input.
std::size_t complete_utf8_prefix(std::string_view bytes);

}  // namespace nibble::text

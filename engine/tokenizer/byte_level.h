#pragma once
// The GPT-2 byte-to-unicode mapping used by ByteLevel pre-tokenizers and decoders: every byte
// maps to one printable code point, so BPE vocabularies can be written as text.
#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace nibble::tokenizer {

// UTF-8 text of the code point that stands for byte b.
const std::string& byte_to_unicode(unsigned char b);

// Maps raw bytes to their ByteLevel text.
std::string bytes_to_byte_level(std::string_view bytes);

// Maps ByteLevel text back to raw bytes; nullopt if a character is not in the mapping.
std::optional<std::string> byte_level_to_bytes(std::string_view text);

}  // namespace nibble::tokenizer

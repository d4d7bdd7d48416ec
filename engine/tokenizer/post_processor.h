#pragma once
// tokenizer.json "post_processor" for a single sequence: which special ids surround the
// encoded text when add_special_tokens is on. Supported: TemplateProcessing (single),
// ByteLevel (changes offsets only, so no ids), Sequence; null adds nothing.
#include <cstdint>
#include <vector>

#include "engine/tokenizer/json_fields.h"

namespace nibble::tokenizer {

struct SpecialTokenTemplate {
  std::vector<std::int32_t> prefix;  // ids before the sequence, e.g. <|begin_of_text|>
  std::vector<std::int32_t> suffix;  // ids after it
};

SpecialTokenTemplate parse_post_processor(const Json& config, const std::string& where);

}  // namespace nibble::tokenizer

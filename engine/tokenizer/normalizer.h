#pragma once
// tokenizer.json "normalizer": text rewrites applied to each span between added tokens before
// pre-tokenization. Supported: NFC, Replace, Prepend, Sequence (null = none). Others are
// rejected at load time with the type named.
#include <memory>
#include <string>

#include "engine/tokenizer/json_fields.h"
#include "engine/tokenizer/pcre_regex.h"

namespace nibble::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string text) const = 0;
};

// nullptr for a null normalizer. `where` names the JSON path for errors.
std::unique_ptr<Normalizer> make_normalizer(const Json& config, const std::string& where);

// A Split/Replace "pattern" field: {"String": literal} or {"Regex": pcre}.
TextPattern parse_pattern(const Json& config, const std::string& where);

}  // namespace nibble::tokenizer

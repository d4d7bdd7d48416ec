#pragma once
// tokenizer.json "pre_tokenizer": splits a normalized span into pieces that BPE encodes one by
// one. Supported: Split (String/Regex; Isolated, Removed, MergedWithPrevious, MergedWithNext,
// invert), ByteLevel (bytes -> GPT-2 alphabet; optional GPT-2 regex and prefix space),
// Metaspace, Sequence. Others are rejected at load time with the type named.
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/json_fields.h"

namespace nibble::tokenizer {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // `first_section`: the span is the first of the input (Metaspace prepend_scheme "first").
  virtual void split(std::vector<std::string>& pieces, bool first_section) const = 0;
};

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& config, const std::string& where);

}  // namespace nibble::tokenizer

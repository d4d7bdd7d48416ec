#pragma once
// Incremental detokenization for streaming responses: push() one id at a time and get the text
// that is now final. Bytes of a UTF-8 character split across tokens are held back until the
// character is complete, so no chunk ever ends inside a character; bytes that can never form
// a character are emitted as U+FFFD. flush() releases what is left at the end.
#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace nibble::tokenizer {

class StreamDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer, DecodeOptions options = {});

  std::string push(TokenId id);
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  DecodeOptions options_;
  bool first_ = true;
  std::string pending_;  // raw bytes not yet emitted
};

}  // namespace nibble::tokenizer

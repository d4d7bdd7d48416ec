#pragma once
// tokenizer.json "decoder": turns token texts back into bytes. Steps work token by token, as
// transformers.js does, until a Fuse step joins them; so the same chain serves whole-sequence
// decode and streaming (one token at a time). Supported: ByteLevel, Replace, ByteFallback,
// Fuse, Strip, Metaspace, Sequence (null = tokens joined as they are). Output pieces are raw
// bytes; callers repair invalid UTF-8 once the pieces are joined.
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/json_fields.h"

namespace nibble::tokenizer {

// One token on its way through the decoder chain.
struct DecodePiece {
  std::string text;
  bool added = false;  // an added token: ByteLevel passes it through untouched
};

// Where the pieces sit in the whole sequence: streaming decodes one token at a time, so only
// the first call is at the start and no call knows it is at the end.
struct DecodeContext {
  bool at_start = true;  // Metaspace / Strip drop the leading space here
  bool at_end = true;    // Strip's `stop` applies here
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode(std::vector<DecodePiece>& pieces, const DecodeContext& context) const = 0;
};

std::unique_ptr<Decoder> make_decoder(const Json& config, const std::string& where);

}  // namespace nibble::tokenizer

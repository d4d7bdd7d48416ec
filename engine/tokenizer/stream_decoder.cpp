#include "engine/tokenizer/stream_decoder.h"

#include "engine/text/utf8.h"

namespace nibble::tokenizer {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, DecodeOptions options)
    : tokenizer_(tokenizer), options_(options) {}

std::string StreamDecoder::push(TokenId id) {
  if (options_.skip_special_tokens && tokenizer_.is_special(id)) {
    tokenizer_.decode_token_bytes(id, false);  // still validates the id
    return {};
  }
  pending_ += tokenizer_.decode_token_bytes(id, first_);
  first_ = false;
  const std::size_t ready = nibble::text::complete_utf8_prefix(pending_);
  std::string out = nibble::text::sanitize_utf8(std::string_view(pending_).substr(0, ready));
  pending_.erase(0, ready);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = nibble::text::sanitize_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace nibble::tokenizer

#pragma once
// The text of one choice as its tokens arrive: incremental detokenization plus stop strings.
// A stop string may span several tokens, so the last (longest stop - 1) bytes are held back
// until they can no longer start a match; the stop string itself is emitted only when asked
// (vLLM's include_stop_str_in_output), and nothing after it either way.
#include <string>
#include <vector>

#include "engine/tokenizer/stream_decoder.h"

namespace nibble::server {

class ChoiceText {
 public:
  ChoiceText(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stop,
             bool skip_special_tokens = true, bool include_stop = false);

  // Text that became final with this token ("" while held back). After a stop string matched,
  // stopped() is true and further tokens are ignored.
  std::string push(int token);
  // Everything still held back, at the end of generation.
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::string release(bool final);

  const tokenizer::Tokenizer& tokenizer_;
  tokenizer::StreamDecoder decoder_;
  std::vector<std::string> stop_;
  bool include_stop_;
  std::size_t holdback_ = 0;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace nibble::server

#pragma once
// A Hugging Face tokenizer loaded from tokenizer.json (+ tokenizer_config.json): byte-level BPE
// (Llama-3, Qwen2/3, GPT-OSS, DeepSeek-V3) and SentencePiece-style BPE with byte fallback
// (Llama-2, Mistral, Gemma). encode() matches transformers(.js) token for token; decode()
// inverts it. Thread-safe after construction.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/decoder.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/post_processor.h"
#include "engine/tokenizer/pre_tokenizer.h"

namespace nibble::tokenizer {

struct EncodeOptions {
  bool add_special_tokens = false;  // apply the post-processor template (e.g. prepend BOS)
};

struct DecodeOptions {
  bool skip_special_tokens = false;
};

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json (required) and DIR/tokenizer_config.json (optional).
  static Tokenizer from_directory(const std::filesystem::path& dir);
  // Reads one tokenizer.json file (no tokenizer_config.json).
  static Tokenizer from_file(const std::filesystem::path& tokenizer_json);
  // `source` names the JSON in error messages.
  static Tokenizer from_json(const Json& tokenizer_json,
                             const std::string& source = "tokenizer.json");

  // Any bytes are accepted: invalid UTF-8 is first replaced by U+FFFD (see sanitize_utf8).
  std::vector<TokenId> encode(std::string_view text, const EncodeOptions& options = {}) const;
  // Unknown ids raise TokenizerError. Invalid UTF-8 produced by the tokens becomes U+FFFD.
  std::string decode(const std::vector<TokenId>& ids, const DecodeOptions& options = {}) const;

  // Raw bytes of one token as it decodes at position `first ? 0 : >0` (for streaming).
  std::string decode_token_bytes(TokenId id, bool first) const;
  bool is_special(TokenId id) const;
  // Whether id names a token. Models often pad their vocabulary past the tokenizer's
  // (Qwen3: 151936 rows, 151669 tokens); generated ids in that gap decode to nothing.
  bool contains(TokenId id) const { return model_->id_to_token(id) != nullptr; }
  std::size_t vocab_size() const { return model_->vocab_size(); }
  std::optional<TokenId> token_to_id(std::string_view token) const {
    return model_->token_to_id(token);
  }

 private:
  Tokenizer() = default;
  void encode_plain(std::string_view text, bool first_section, std::vector<TokenId>& out) const;
  std::vector<DecodePiece> pieces_for(const std::vector<TokenId>& ids, bool skip_special) const;

  std::shared_ptr<const Normalizer> normalizer_;
  std::shared_ptr<const PreTokenizer> pre_tokenizer_;
  std::shared_ptr<BpeModel> model_;
  std::shared_ptr<const Decoder> decoder_;
  std::shared_ptr<const AddedTokenSplitter> added_;
  SpecialTokenTemplate template_;
};

}  // namespace nibble::tokenizer

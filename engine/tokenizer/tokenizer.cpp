#include "engine/tokenizer/tokenizer.h"

#include <fstream>
#include <sstream>
#include <unordered_set>

#include "engine/text/utf8.h"

namespace nibble::tokenizer {
namespace {

Json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw TokenizerError(path.string() + ": cannot open (expected a Hugging Face tokenizer file)");
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return Json::parse(buffer.str());
  } catch (const Json::parse_error& e) {
    throw TokenizerError(path.string() + ": not valid JSON: " + e.what());
  }
}

const Json& field_or_null(const Json& j, const char* key) {
  static const Json null_json;
  auto it = j.find(key);
  return it == j.end() ? null_json : *it;
}

}  // namespace

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  return from_json(read_json_file(tokenizer_json), tokenizer_json.string());
}

Tokenizer Tokenizer::from_directory(const std::filesystem::path& dir) {
  Tokenizer t = from_file(dir / "tokenizer.json");
  const auto config_path = dir / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    // additional_special_tokens count as special for skip_special_tokens, as in transformers.
    const Json config = read_json_file(config_path);
    const Json& extra = field_or_null(config, "additional_special_tokens");
    if (!extra.is_null() && !extra.is_array())
      throw TokenizerError(config_path.string() +
                           ": additional_special_tokens: expected an array, got " +
                           json_kind(extra));
    if (extra.is_array()) {
      std::unordered_set<std::string> names;
      for (const auto& e : extra) {
        if (e.is_string())
          names.insert(e.get<std::string>());
        else if (e.is_object() && e.contains("content"))
          names.insert(e["content"].get<std::string>());
      }
      auto tokens = t.added_->tokens();
      for (auto& tok : tokens)
        if (names.count(tok.content)) tok.special = true;
      t.added_ = std::make_shared<AddedTokenSplitter>(std::move(tokens));
    }
  }
  return t;
}

Tokenizer Tokenizer::from_json(const Json& j, const std::string& source) {
  if (!j.is_object())
    throw TokenizerError(source + ": expected a JSON object at the top level, got " + json_kind(j));
  Tokenizer t;
  t.normalizer_ = make_normalizer(field_or_null(j, "normalizer"), source + ": normalizer");
  t.pre_tokenizer_ =
      make_pre_tokenizer(field_or_null(j, "pre_tokenizer"), source + ": pre_tokenizer");
  t.model_ = std::make_shared<BpeModel>(require_field(j, "model", source), source + ": model");
  t.decoder_ = make_decoder(field_or_null(j, "decoder"), source + ": decoder");
  t.template_ =
      parse_post_processor(field_or_null(j, "post_processor"), source + ": post_processor");
  auto added = parse_added_tokens(field_or_null(j, "added_tokens"), source + ": added_tokens");
  for (const auto& a : added) t.model_->add_token(a.content, a.id);
  t.added_ = std::make_shared<AddedTokenSplitter>(std::move(added));
  for (TokenId id : t.template_.prefix)
    if (!t.model_->id_to_token(id))
      throw TokenizerError(source + ": post_processor: special token id " + std::to_string(id) +
                           " is not in the vocab");
  for (TokenId id : t.template_.suffix)
    if (!t.model_->id_to_token(id))
      throw TokenizerError(source + ": post_processor: special token id " + std::to_string(id) +
                           " is not in the vocab");
  return t;
}

void Tokenizer::encode_plain(std::string_view text, bool first_section,
                             std::vector<TokenId>& out) const {
  std::string normalized =
      normalizer_ ? normalizer_->normalize(std::string(text)) : std::string(text);
  if (normalized.empty()) return;
  std::vector<std::string> pieces{std::move(normalized)};
  if (pre_tokenizer_) pre_tokenizer_->split(pieces, first_section);
  for (const auto& p : pieces) model_->encode(p, out);
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  // Invalid UTF-8 becomes U+FFFD first, exactly as the JS tokenizer sees the text after
  // TextDecoder; no stage below ever sees ill-formed input.
  const std::string clean = nibble::text::sanitize_utf8(text);
  std::vector<TokenId> ids;
  if (options.add_special_tokens) ids = template_.prefix;
  const auto sections = added_->split(clean);
  for (std::size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].token) {
      ids.push_back(sections[i].token->id);
    } else {
      encode_plain(sections[i].text, i == 0, ids);
    }
  }
  if (options.add_special_tokens)
    ids.insert(ids.end(), template_.suffix.begin(), template_.suffix.end());
  return ids;
}

bool Tokenizer::is_special(TokenId id) const {
  const AddedToken* t = added_->find_id(id);
  return t && t->special;
}

std::vector<DecodePiece> Tokenizer::pieces_for(const std::vector<TokenId>& ids,
                                               bool skip_special) const {
  std::vector<DecodePiece> pieces;
  pieces.reserve(ids.size());
  for (TokenId id : ids) {
    const std::string* text = model_->id_to_token(id);
    if (!text)
      throw TokenizerError("decode: token id " + std::to_string(id) +
                           " is outside the vocabulary (size " +
                           std::to_string(model_->vocab_size()) + ")");
    const AddedToken* added = added_->find_id(id);
    if (skip_special && added && added->special) continue;
    pieces.push_back({*text, added != nullptr});
  }
  return pieces;
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, const DecodeOptions& options) const {
  auto pieces = pieces_for(ids, options.skip_special_tokens);
  if (decoder_) decoder_->decode(pieces, DecodeContext{});
  std::string bytes;
  for (const auto& p : pieces) bytes += p.text;
  return nibble::text::sanitize_utf8(bytes);
}

std::string Tokenizer::decode_token_bytes(TokenId id, bool first) const {
  auto pieces = pieces_for({id}, false);
  if (decoder_) decoder_->decode(pieces, DecodeContext{.at_start = first, .at_end = false});
  return pieces.empty() ? std::string() : pieces[0].text;
}

}  // namespace nibble::tokenizer

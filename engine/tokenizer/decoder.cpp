#include "engine/tokenizer/decoder.h"

#include <cctype>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/normalizer.h"

namespace nibble::tokenizer {
namespace {

class ByteLevelDecoder final : public Decoder {
 public:
  void decode(std::vector<DecodePiece>& pieces, const DecodeContext&) const override {
    for (auto& p : pieces) {
      if (p.added) continue;
      // A character outside the byte alphabet cannot come from a ByteLevel vocab; keep it.
      if (auto bytes = byte_level_to_bytes(p.text)) p.text = std::move(*bytes);
    }
  }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(TextPattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode(std::vector<DecodePiece>& pieces, const DecodeContext&) const override {
    for (auto& p : pieces) p.text = pattern_.replace_all(p.text, content_);
  }

 private:
  TextPattern pattern_;
  std::string content_;
};

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode(std::vector<DecodePiece>& pieces, const DecodeContext&) const override {
    for (auto& p : pieces) {
      const auto& t = p.text;
      if (t.size() == 6 && t.rfind("<0x", 0) == 0 && t.back() == '>' &&
          std::isxdigit(static_cast<unsigned char>(t[3])) &&
          std::isxdigit(static_cast<unsigned char>(t[4])))
        p.text = std::string(1, static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
    }
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode(std::vector<DecodePiece>& pieces, const DecodeContext&) const override {
    if (pieces.size() < 2) return;
    DecodePiece joined;
    for (const auto& p : pieces) joined.text += p.text;
    pieces = {std::move(joined)};
  }
};

class StripDecoder final : public Decoder {
 public:
  // `after_fuse`: the pieces were joined into the whole text, so start/stop strip only at the
  // ends of the sequence; otherwise every token is stripped (transformers.js semantics).
  StripDecoder(std::string content, std::size_t start, std::size_t stop, bool after_fuse)
      : content_(std::move(content)), start_(start), stop_(stop), after_fuse_(after_fuse) {}
  void decode(std::vector<DecodePiece>& pieces, const DecodeContext& context) const override {
    for (std::size_t k = 0; k < pieces.size(); ++k) {
      auto& t = pieces[k].text;
      const std::size_t start = !after_fuse_ || (context.at_start && k == 0) ? start_ : 0;
      const std::size_t stop =
          !after_fuse_ || (context.at_end && k + 1 == pieces.size()) ? stop_ : 0;
      for (std::size_t i = 0; i < start && t.rfind(content_, 0) == 0 && !content_.empty(); ++i)
        t.erase(0, content_.size());
      for (std::size_t i = 0; i < stop && !content_.empty() && t.size() >= content_.size() &&
                              t.compare(t.size() - content_.size(), content_.size(), content_) == 0;
           ++i)
        t.resize(t.size() - content_.size());
    }
  }

 private:
  std::string content_;
  std::size_t start_, stop_;
  bool after_fuse_;
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode(std::vector<DecodePiece>& pieces, const DecodeContext& context) const override {
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      auto& t = pieces[i].text;
      t = TextPattern::literal(replacement_).replace_all(t, " ");
      if (strip_first_ && context.at_start && i == 0 && !t.empty() && t[0] == ' ') t.erase(0, 1);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps)
      : steps_(std::move(steps)) {}
  void decode(std::vector<DecodePiece>& pieces, const DecodeContext& context) const override {
    for (const auto& s : steps_) s->decode(pieces, context);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

std::size_t optional_size(const Json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0;
  if (!it->is_number_unsigned())
    throw TokenizerError(where + "." + key + ": expected a non-negative integer, got " +
                         it->dump());
  return it->get<std::size_t>();
}

}  // namespace

namespace {

std::unique_ptr<Decoder> make_step(const Json& config, const std::string& where, bool after_fuse) {
  if (config.is_null()) return nullptr;
  const std::string type = require_string(config, "type", where);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Replace")
    return std::make_unique<ReplaceDecoder>(
        parse_pattern(require_field(config, "pattern", where), where + ".pattern"),
        require_string(config, "content", where));
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip")
    return std::make_unique<StripDecoder>(require_string(config, "content", where),
                                          optional_size(config, "start", where),
                                          optional_size(config, "stop", where), after_fuse);
  if (type == "Metaspace") {
    std::string scheme = optional_string(config, "prepend_scheme", "", where);
    const bool strip =
        scheme.empty() ? optional_bool(config, "add_prefix_space", true, where) : scheme != "never";
    return std::make_unique<MetaspaceDecoder>(
        optional_string(config, "replacement", "\xE2\x96\x81", where), strip);
  }
  if (type == "Sequence") {
    const Json& list = require_field(config, "decoders", where);
    if (!list.is_array())
      throw TokenizerError(where + ".decoders: expected an array, got " + json_kind(list));
    std::vector<std::unique_ptr<Decoder>> steps;
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (auto d = make_step(list[i], where + ".decoders[" + std::to_string(i) + "]", after_fuse))
        steps.push_back(std::move(d));
      if (list[i].is_object() && list[i].value("type", "") == "Fuse") after_fuse = true;
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  throw TokenizerError(
      where + ".type: unsupported decoder '" + type +
      "' (supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence)");
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const Json& config, const std::string& where) {
  return make_step(config, where, false);
}

}  // namespace nibble::tokenizer

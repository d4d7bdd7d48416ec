#include "engine/tokenizer/pre_tokenizer.h"

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/pcre_regex.h"

namespace nibble::tokenizer {
namespace {

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext };

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(TextPattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

  void split(std::vector<std::string>& pieces, bool) const override {
    std::vector<std::string> out;
    for (const auto& piece : pieces) split_one(piece, out);
    pieces = std::move(out);
  }

 private:
  void split_one(const std::string& text, std::vector<std::string>& out) const {
    // Mark each stretch as matched or not, then group by behaviour (as HF tokenizers do).
    std::vector<std::pair<std::string_view, bool>> parts;
    const std::string_view sv(text);
    std::size_t last = 0;
    for (auto [b, e] : pattern_.find_all(sv)) {
      if (b > last) parts.emplace_back(sv.substr(last, b - last), invert_);
      parts.emplace_back(sv.substr(b, e - b), !invert_);
      last = e;
    }
    if (last < sv.size()) parts.emplace_back(sv.substr(last), invert_);
    std::string pending;
    bool has_pending = false;
    for (auto [part, is_delim] : parts) {
      switch (behavior_) {
        case SplitBehavior::kIsolated:
          out.emplace_back(part);
          break;
        case SplitBehavior::kRemoved:
          if (!is_delim) out.emplace_back(part);
          break;
        case SplitBehavior::kMergedWithPrevious:
          if (is_delim && !out.empty() && has_pending) {
            out.back() += part;
          } else {
            out.emplace_back(part);
          }
          has_pending = !is_delim;
          break;
        case SplitBehavior::kMergedWithNext:
          if (is_delim) {
            pending += part;
          } else {
            out.push_back(pending + std::string(part));
            pending.clear();
          }
          break;
      }
    }
    if (!pending.empty()) out.push_back(pending);
  }

  TextPattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space) {
    // The GPT-2 word pattern that ByteLevel applies when use_regex is true (a fixed part of the
    // ByteLevel format, not of any tokenizer.json).
    if (use_regex)
      regex_ = TextPattern::regex(
          R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
          "ByteLevel");
    use_regex_ = use_regex;
  }

  void split(std::vector<std::string>& pieces, bool) const override {
    std::vector<std::string> out;
    out.reserve(pieces.size());
    for (auto& piece : pieces) {
      if (add_prefix_space_ && (piece.empty() || piece[0] != ' ')) piece.insert(piece.begin(), ' ');
      if (!use_regex_) {
        out.push_back(bytes_to_byte_level(piece));
        continue;
      }
      for (auto [b, e] : regex_.find_all(piece))
        out.push_back(bytes_to_byte_level(std::string_view(piece).substr(b, e - b)));
    }
    pieces = std::move(out);
  }

 private:
  bool add_prefix_space_;
  bool use_regex_ = false;
  TextPattern regex_ = TextPattern::literal("");
};

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, std::string prepend_scheme, bool split)
      : replacement_(std::move(replacement)),
        prepend_scheme_(std::move(prepend_scheme)),
        split_(split) {}

  void split(std::vector<std::string>& pieces, bool first_section) const override {
    std::vector<std::string> out;
    for (const auto& piece : pieces) {
      std::string text = TextPattern::literal(" ").replace_all(piece, replacement_);
      const bool prepend =
          prepend_scheme_ == "always" || (prepend_scheme_ == "first" && first_section);
      if (prepend && text.rfind(replacement_, 0) != 0) text = replacement_ + text;
      if (!split_) {
        out.push_back(std::move(text));
        continue;
      }
      // Split before every replacement character (MergedWithNext).
      std::size_t start = 0;
      for (std::size_t pos = text.find(replacement_, 1); pos != std::string::npos;
           pos = text.find(replacement_, pos + 1)) {
        out.push_back(text.substr(start, pos - start));
        start = pos;
      }
      out.push_back(text.substr(start));
    }
    pieces = std::move(out);
  }

 private:
  std::string replacement_, prepend_scheme_;
  bool split_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void split(std::vector<std::string>& pieces, bool first_section) const override {
    for (const auto& s : steps_) s->split(pieces, first_section);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

SplitBehavior parse_behavior(const std::string& name, const std::string& where) {
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  throw TokenizerError(where + ".behavior: unsupported '" + name +
                       "' (supported: Isolated, Removed, MergedWithPrevious, MergedWithNext)");
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& config, const std::string& where) {
  if (config.is_null()) return nullptr;
  const std::string type = require_string(config, "type", where);
  if (type == "Split") {
    return std::make_unique<SplitPreTokenizer>(
        parse_pattern(require_field(config, "pattern", where), where + ".pattern"),
        parse_behavior(require_string(config, "behavior", where), where),
        optional_bool(config, "invert", false, where));
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(
        optional_bool(config, "add_prefix_space", true, where),
        optional_bool(config, "use_regex", true, where));
  }
  if (type == "Metaspace") {
    std::string scheme = optional_string(config, "prepend_scheme", "", where);
    if (scheme.empty())
      scheme = optional_bool(config, "add_prefix_space", true, where) ? "always" : "never";
    if (scheme != "always" && scheme != "first" && scheme != "never")
      throw TokenizerError(where + ".prepend_scheme: expected always, first or never, got '" +
                           scheme + "'");
    return std::make_unique<MetaspacePreTokenizer>(
        optional_string(config, "replacement", "\xE2\x96\x81", where), scheme,
        optional_bool(config, "split", true, where));
  }
  if (type == "Sequence") {
    const Json& list = require_field(config, "pretokenizers", where);
    if (!list.is_array())
      throw TokenizerError(where + ".pretokenizers: expected an array, got " + json_kind(list));
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (auto p = make_pre_tokenizer(list[i], where + ".pretokenizers[" + std::to_string(i) + "]"))
        steps.push_back(std::move(p));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  throw TokenizerError(where + ".type: unsupported pre_tokenizer '" + type +
                       "' (supported: Split, ByteLevel, Metaspace, Sequence)");
}

}  // namespace nibble::tokenizer

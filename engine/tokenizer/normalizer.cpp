#include "engine/tokenizer/normalizer.h"

#include <vector>

#include "engine/tokenizer/pcre_regex.h"
#include "engine/tokenizer/unicode_nfc.h"

namespace nibble::tokenizer {
namespace {

class NfcNormalizer final : public Normalizer {
 public:
  std::string normalize(std::string text) const override { return to_nfc(text); }
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(TextPattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string text) const override {
    return pattern_.replace_all(text, content_);
  }

 private:
  TextPattern pattern_;
  std::string content_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string text) const override { return prefix_ + text; }

 private:
  std::string prefix_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  std::string normalize(std::string text) const override {
    for (const auto& s : steps_) text = s->normalize(std::move(text));
    return text;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& config, const std::string& where) {
  if (config.is_null()) return nullptr;
  const std::string type = require_string(config, "type", where);
  if (type == "NFC") return std::make_unique<NfcNormalizer>();
  if (type == "Replace")
    return std::make_unique<ReplaceNormalizer>(
        parse_pattern(require_field(config, "pattern", where), where + ".pattern"),
        require_string(config, "content", where));
  if (type == "Prepend")
    return std::make_unique<PrependNormalizer>(require_string(config, "prepend", where));
  if (type == "Sequence") {
    const Json& list = require_field(config, "normalizers", where);
    if (!list.is_array())
      throw TokenizerError(where + ".normalizers: expected an array, got " + json_kind(list));
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (auto n = make_normalizer(list[i], where + ".normalizers[" + std::to_string(i) + "]"))
        steps.push_back(std::move(n));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  throw TokenizerError(where + ".type: unsupported normalizer '" + type +
                       "' (supported: NFC, Replace, Prepend, Sequence)");
}

// {"String": "..."} or {"Regex": "..."}.
TextPattern parse_pattern(const Json& config, const std::string& where) {
  if (config.is_object()) {
    if (auto it = config.find("String"); it != config.end() && it->is_string())
      return TextPattern::literal(it->get<std::string>());
    if (auto it = config.find("Regex"); it != config.end() && it->is_string())
      return TextPattern::regex(it->get<std::string>(), where + ".Regex");
  }
  throw TokenizerError(where + ": expected {\"String\": ...} or {\"Regex\": ...}, got " +
                       config.dump());
}

}  // namespace nibble::tokenizer

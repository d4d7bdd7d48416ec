#include "engine/tokenizer/post_processor.h"

namespace nibble::tokenizer {
namespace {

void parse_into(const Json& config, const std::string& where, SpecialTokenTemplate& out) {
  if (config.is_null()) return;
  const std::string type = require_string(config, "type", where);
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    const Json& list = require_field(config, "processors", where);
    if (!list.is_array())
      throw TokenizerError(where + ".processors: expected an array, got " + json_kind(list));
    for (std::size_t i = 0; i < list.size(); ++i)
      parse_into(list[i], where + ".processors[" + std::to_string(i) + "]", out);
    return;
  }
  if (type != "TemplateProcessing")
    throw TokenizerError(where + ".type: unsupported post_processor '" + type +
                         "' (supported: TemplateProcessing, ByteLevel, Sequence)");
  const Json& single = require_field(config, "single", where);
  if (!single.is_array())
    throw TokenizerError(where + ".single: expected an array, got " + json_kind(single));
  const Json& specials = require_field(config, "special_tokens", where);
  bool seen_sequence = false;
  SpecialTokenTemplate t;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const std::string at = where + ".single[" + std::to_string(i) + "]";
    const Json& item = single[i];
    if (item.contains("Sequence")) {
      if (seen_sequence)
        throw TokenizerError(at + ": the single template has more than one Sequence");
      seen_sequence = true;
      continue;
    }
    if (!item.contains("SpecialToken"))
      throw TokenizerError(at + ": expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    const std::string name = require_string(item["SpecialToken"], "id", at + ".SpecialToken");
    const Json& entry = require_field(specials, name.c_str(), where + ".special_tokens");
    const Json& ids = require_field(entry, "ids", where + ".special_tokens." + name);
    if (!ids.is_array())
      throw TokenizerError(where + ".special_tokens." + name + ".ids: expected an array of ids");
    auto& target = seen_sequence ? t.suffix : t.prefix;
    for (const auto& id : ids) {
      if (!id.is_number_integer())
        throw TokenizerError(where + ".special_tokens." + name + ".ids: expected integers, got " +
                             id.dump());
      target.push_back(id.get<std::int32_t>());
    }
  }
  out = std::move(t);
}

}  // namespace

SpecialTokenTemplate parse_post_processor(const Json& config, const std::string& where) {
  SpecialTokenTemplate t;
  parse_into(config, where, t);
  return t;
}

}  // namespace nibble::tokenizer

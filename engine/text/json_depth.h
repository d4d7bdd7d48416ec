#pragma once
// JSON parsed with a limit on how deeply arrays and objects nest. What walks a parsed value
// afterwards (dump, copies, comparisons, schema compilation, template rendering) recurses once
// per level, so text from clients is bounded here, before any of that runs. nlohmann's parser
// is iterative itself, and Debian 12's nlohmann-json 3.11.2 destroys values without recursion
// (tests/server/test_bounded_json.cpp checks both). Header-only: users already have nlohmann.
#include <nlohmann/json.hpp>

#include <string_view>

namespace nibble::text {

// The engine's default (--max-json-depth): far above what a real schema or request nests, far
// below what a recursive walk of the value could take on a thread's stack.
inline constexpr int kDefaultMaxJsonDepth = 128;

// Thrown by parse_json_with_max_depth when the text nests deeper than allowed.
struct JsonTooDeep {};

// Json is nlohmann::json or nlohmann::ordered_json. Depth counts the containers around a value,
// the outermost included: `[[1]]` is 2 levels deep. Invalid JSON gives a discarded value
// (is_discarded()); nesting past max_depth throws JsonTooDeep as soon as the parser reaches it.
template <class Json>
Json parse_json_with_max_depth(std::string_view text, int max_depth) {
  // The callback's depth counts the containers around the one that starts.
  typename Json::parser_callback_t limit_depth = [max_depth](int depth,
                                                             typename Json::parse_event_t event,
                                                             Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= max_depth) {
      throw JsonTooDeep{};
    }
    return true;
  };
  return Json::parse(text, limit_depth, /*allow_exceptions=*/false);
}

}  // namespace nibble::text

#pragma once
// JSON parsed with a limit on how deeply arrays and objects nest. What walks a parsed value
// afterwards (dump, copies, comparisons, schema compilation, template rendering) recurses once
// per level, so text from clients is bounded here, before any of that runs. nlohmann's parser
// is iterative itself, and Debian 12's nlohmann-json 3.11.2 destroys values without recursion
// (tests/server/test_bounded_json.cpp checks both). Header-only: users already have nlohmann.
//
// The limit is a SAX pass of its own, then a plain parse: nlohmann's callback parser (the other
// way to see the depth) scans the enclosing container at every object's end, so `[{}, {}, ...]`
// or a safetensors header of tens of thousands of tensors took time quadratic in its entries
// (bench_safetensors_header: 6,481 ms against 110 ms at 32,000 entries). Both passes are linear.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace nibble::text {

// The engine's default (--max-json-depth): far above what a real schema or request nests, far
// below what a recursive walk of the value could take on a thread's stack.
inline constexpr int kDefaultMaxJsonDepth = 128;

// Thrown by parse_json_with_max_depth when the text nests deeper than allowed.
struct JsonTooDeep {};

// The SAX pass: nesting depth against max_depth (throws JsonTooDeep where a container opens past
// it), and each key of the outermost object to on_top_key when given. Builds nothing.
template <class Json>
class JsonShapeCheck : public nlohmann::json_sax<Json> {
 public:
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using string_t = typename Json::string_t;
  using binary_t = typename Json::binary_t;

  JsonShapeCheck(int max_depth, std::function<void(const string_t&)> on_top_key = {})
      : max_depth_(max_depth), on_top_key_(std::move(on_top_key)) {}

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t& key) override {
    if (depth_ == 1 && on_top_key_) on_top_key_(key);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool open() {
    if (++depth_ > max_depth_) throw JsonTooDeep{};
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }

  int max_depth_;
  int depth_ = 0;  // containers open around the next value, the outermost included
  std::function<void(const string_t&)> on_top_key_;
};

// Json is nlohmann::json or nlohmann::ordered_json. Depth counts the containers around a value,
// the outermost included: `[[1]]` is 2 levels deep. Invalid JSON gives a discarded value
// (is_discarded()); nesting past max_depth throws JsonTooDeep before any value is built.
// on_top_key, when given, sees every key of the outermost object in order, duplicates included
// (the value keeps the last).
template <class Json>
Json parse_json_with_max_depth(
    std::string_view text, int max_depth,
    std::function<void(const typename Json::string_t&)> on_top_key = {}) {
  JsonShapeCheck<Json> check(max_depth, std::move(on_top_key));
  if (!Json::sax_parse(text, &check)) return Json(Json::value_t::discarded);
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

}  // namespace nibble::text

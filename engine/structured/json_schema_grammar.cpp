#include "engine/structured/json_schema_grammar.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "engine/structured/number_range_grammar.h"
#include "engine/structured/regex_grammar.h"
#include "engine/structured/structured_error.h"
#include "engine/structured/utf8_ranges.h"

namespace nibble::structured {
namespace {

using Json = nlohmann::ordered_json;

const std::set<std::string> kAnnotations = {"title",    "description", "default",  "examples",
                                            "$schema",  "$id",         "$comment", "deprecated",
                                            "readOnly", "writeOnly",   "$defs",    "definitions"};
const std::set<std::string> kStructural = {"type",
                                           "properties",
                                           "required",
                                           "additionalProperties",
                                           "items",
                                           "minItems",
                                           "maxItems",
                                           "enum",
                                           "const",
                                           "anyOf",
                                           "$ref",
                                           "minLength",
                                           "maxLength",
                                           "pattern",
                                           "format",
                                           "minimum",
                                           "maximum",
                                           "exclusiveMinimum",
                                           "exclusiveMaximum",
                                           "multipleOf"};

// Numbers with bounds are written in fixed point with at most this many fraction digits and
// no exponent; bounds may be at most kMaxNumberBound in magnitude. Then every value written
// converts to a distinct double in the same order, so a validator comparing doubles agrees
// with the grammar's decimal comparison (1e9 has a ulp of 1.2e-7, below half of 1e-6).
constexpr int kNumberFractionDigits = 6;
constexpr std::int64_t kMaxNumberBound = 1'000'000'000;
constexpr std::int64_t kMaxIntegerBound = 9'007'199'254'740'991;  // 2^53 - 1: exact in a double
constexpr std::int64_t kMaxMultipleOf = 1000;
constexpr std::int64_t kMaxListedMultiples = 1000;
const char* const kBoundKeywords[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};

// Regexes for the formats OpenAI documents; each generates a subset of the format's strings
// (e.g. dates only up to day 28 of February, IPv6 in full form), so every output validates.
const std::map<std::string, std::string> kFormatRegexes = {
    {"date",
     R"(\d{4}-((0[1-9]|1[0-2])-(0[1-9]|1\d|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31))"},
    {"time", R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
    {"date-time",
     R"(\d{4}-((0[1-9]|1[0-2])-(0[1-9]|1\d|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
    {"duration",
     R"(P(\d+W|(\d+Y(\d+M)?(\d+D)?|\d+M(\d+D)?|\d+D)(T(\d+H(\d+M)?(\d+S)?|\d+M(\d+S)?|\d+S))?|T(\d+H(\d+M)?(\d+S)?|\d+M(\d+S)?|\d+S)))"},
    {"email",
     R"([a-zA-Z0-9_+-]{1,32}(\.[a-zA-Z0-9_+-]{1,32}){0,3}@([a-zA-Z0-9]([a-zA-Z0-9-]{0,30}[a-zA-Z0-9])?\.){1,3}[a-zA-Z]{2,16})"},
    {"hostname",
     R"([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?){0,2})"},
    {"ipv4", R"((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3})"},
    {"ipv6", R"([0-9a-f]{1,4}(:[0-9a-f]{1,4}){7})"},
    {"uuid", R"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"},
};

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& builder, const Json& root, const JsonGrammarOptions& options)
      : b_(builder), root_(root), options_(options) {}

  Symbol compile(const Json& schema, const std::string& path) {
    if (b_.num_rules() > options_.max_elements / 4) {
      throw StructuredError("the schema is too large to compile into a grammar", "schema");
    }
    // Compilation recurses once per level (a chain of $ref targets too), so the nesting is
    // bounded before the call stack is.
    if (depth_ >= options_.max_depth) {
      fail("the schema nests more than " + std::to_string(options_.max_depth) +
               " levels deep (subschemas and $ref targets counted); the limit is " +
               std::to_string(options_.max_depth),
           path, "schema");
    }
    struct Nested {
      int& depth;
      explicit Nested(int& d) : depth(++d) {}
      ~Nested() { --depth; }
    } nested(depth_);
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return any_value();
      fail("the schema 'false' matches nothing", path, "false");
    }
    if (!schema.is_object()) fail("a schema must be an object or a boolean", path, "schema");
    for (const auto& [key, value] : schema.items()) {
      if (kAnnotations.count(key) || kStructural.count(key)) continue;
      fail("JSON Schema keyword '" + key + "' is not supported for structured outputs", path, key);
    }
    if (schema.contains("$ref")) {
      for (const auto& [key, value] : schema.items()) {
        if (key != "$ref" && !kAnnotations.count(key)) {
          fail("'" + key + "' beside '$ref' is not supported", path, key);
        }
      }
      return reference(schema["$ref"], path);
    }
    if (schema.contains("const")) return literal_value(schema["const"]);
    if (schema.contains("enum")) {
      const Json& values = schema["enum"];
      if (!values.is_array() || values.empty()) {
        fail("'enum' must be a non-empty array", path, "enum");
      }
      std::vector<std::vector<Symbol>> alts;
      for (const Json& v : values) alts.push_back({literal_value(v)});
      return b_.choice("enum", alts);
    }
    if (schema.contains("anyOf")) {
      const Json& options = schema["anyOf"];
      if (!options.is_array() || options.empty()) {
        fail("'anyOf' must be a non-empty array", path, "anyOf");
      }
      for (const auto& [key, value] : schema.items()) {
        if (key != "anyOf" && !kAnnotations.count(key)) {
          fail("'" + key + "' beside 'anyOf' is not supported (put it inside each option)", path,
               key);
        }
      }
      std::vector<std::vector<Symbol>> alts;
      for (std::size_t i = 0; i < options.size(); ++i) {
        alts.push_back({compile(options[i], path + "/anyOf/" + std::to_string(i))});
      }
      return b_.choice("anyOf", alts);
    }
    std::vector<std::string> types;
    if (schema.contains("type")) {
      const Json& t = schema["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const Json& item : t) {
          if (!item.is_string())
            fail("'type' must be a string or an array of strings", path, "type");
          types.push_back(item.get<std::string>());
        }
      } else {
        fail("'type' must be a string or a non-empty array of strings", path, "type");
      }
    } else if (schema.contains("properties") || schema.contains("additionalProperties") ||
               schema.contains("required")) {
      types = {"object"};
    } else if (schema.contains("items") || schema.contains("minItems") ||
               schema.contains("maxItems")) {
      types = {"array"};
    } else if (schema.contains("pattern") || schema.contains("format") ||
               schema.contains("minLength") || schema.contains("maxLength")) {
      types = {"string"};
    } else if (has_numeric_keywords(schema)) {
      types = {"number"};
    } else {
      return any_value();
    }
    std::vector<std::vector<Symbol>> alts;
    for (const std::string& type : types) alts.push_back({typed(schema, type, path)});
    return alts.size() == 1 ? alts[0][0] : b_.choice("types", alts);
  }

  Symbol any_object() { return object_of(any_value()); }

 private:
  [[noreturn]] static void fail(const std::string& message, const std::string& path,
                                const std::string& keyword) {
    throw StructuredError(message + " (at " + (path.empty() ? "#" : path) + ")", keyword);
  }

  Symbol typed(const Json& schema, const std::string& type, const std::string& path) {
    if (type == "object") return object(schema, path);
    if (type == "array") return array(schema, path);
    if (type == "string") return string(schema, path);
    if (type == "integer") return bounded_number(schema, path, true);
    if (type == "number") return bounded_number(schema, path, false);
    if (type == "boolean")
      return b_.choice("boolean", {{b_.literal("true")}, {b_.literal("false")}});
    if (type == "null") return b_.literal("null");
    fail("unknown type '" + type + "'", path, "type");
  }

  Symbol ws() {
    if (ws_) return *ws_;
    // ws_k: up to k whitespace bytes, nested so that the grammar stays unambiguous.
    ByteSet space;
    space.add(' ');
    space.add('\t');
    space.add('\n');
    const Symbol one = b_.byte_set(space);
    ws_ = b_.repeat("ws", one, 0, options_.max_whitespace);
    return *ws_;
  }

  std::vector<Symbol> separator(char c) {
    const Symbol w = ws();
    return {w, b_.byte((unsigned char)c), w};
  }

  Symbol literal_value(const Json& value) { return b_.literal(value.dump()); }

  Symbol reference(const Json& ref, const std::string& path) {
    if (!ref.is_string()) fail("'$ref' must be a string", path, "$ref");
    const std::string target = ref.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return Symbol::rule(it->second);
    if (target.empty() || target[0] != '#') {
      fail("only references inside the schema ('#...') are supported, got '" + target + "'", path,
           "$ref");
    }
    const Json* node = nullptr;
    try {
      node = &root_.at(Json::json_pointer(target.substr(1)));
    } catch (const std::exception&) {
      fail("'$ref' target '" + target + "' does not exist", path, "$ref");
    }
    // The rule exists before its body, so the body may refer to itself.
    const int rule = b_.new_rule("ref " + target);
    refs_[target] = rule;
    b_.add_alternative(rule, {compile(*node, target)});
    return Symbol::rule(rule);
  }

  Symbol object(const Json& schema, const std::string& path) {
    const Json empty = Json::object();
    const Json& properties = schema.contains("properties") ? schema["properties"] : empty;
    if (!properties.is_object()) fail("'properties' must be an object", path, "properties");
    std::set<std::string> required;
    if (schema.contains("required")) {
      const Json& r = schema["required"];
      if (!r.is_array()) fail("'required' must be an array of names", path, "required");
      for (const Json& name : r) {
        if (!name.is_string()) fail("'required' must be an array of names", path, "required");
        if (!properties.contains(name.get<std::string>())) {
          fail("required property '" + name.get<std::string>() + "' is not in 'properties'", path,
               "required");
        }
        required.insert(name.get<std::string>());
      }
    }
    const Json* additional =
        schema.contains("additionalProperties") ? &schema["additionalProperties"] : nullptr;
    if (properties.empty()) {
      if (additional && additional->is_boolean() && !additional->get<bool>()) {
        return b_.choice("{}", {{b_.byte('{'), ws(), b_.byte('}')}});
      }
      return object_of(additional && !additional->is_boolean()
                           ? compile(*additional, path + "/additionalProperties")
                           : any_value());
    }
    if (additional && !additional->is_boolean()) {
      // Validate the schema so that a bad one is reported, although declared properties are
      // all this object will carry.
      compile(*additional, path + "/additionalProperties");
    }
    std::vector<std::pair<Symbol, bool>> members;  // key: value, required
    for (const auto& [name, sub] : properties.items()) {
      std::vector<Symbol> seq = {b_.literal(Json(name).dump())};
      const std::vector<Symbol> colon = separator(':');
      seq.insert(seq.end(), colon.begin(), colon.end());
      seq.push_back(compile(sub, path + "/properties/" + name));
      seq.push_back(ws());
      members.push_back({b_.choice("member " + name, {seq}), required.count(name) > 0});
    }
    // tail[i][any]: members i.. given whether one was already written (a comma is due).
    const std::size_t n = members.size();
    std::vector<std::array<int, 2>> tail(n + 1);
    for (std::size_t i = 0; i <= n; ++i) {
      for (int any = 0; any < 2; ++any) tail[i][std::size_t(any)] = b_.new_rule("members");
    }
    for (int any = 0; any < 2; ++any) b_.add_alternative(tail[n][std::size_t(any)], {});
    for (std::size_t i = n; i-- > 0;) {
      for (int any = 0; any < 2; ++any) {
        std::vector<Symbol> emit;
        if (any) emit = {b_.byte(','), ws()};
        emit.push_back(members[i].first);
        emit.push_back(Symbol::rule(tail[i + 1][1]));
        b_.add_alternative(tail[i][std::size_t(any)], emit);
        if (!members[i].second) {
          b_.add_alternative(tail[i][std::size_t(any)],
                             {Symbol::rule(tail[i + 1][std::size_t(any)])});
        }
      }
    }
    return b_.choice("object", {{b_.byte('{'), ws(), Symbol::rule(tail[0][0]), b_.byte('}')}});
  }

  // An object with any keys, every value matching `value`.
  Symbol object_of(Symbol value) {
    std::vector<Symbol> member = {json_string()};
    const std::vector<Symbol> colon = separator(':');
    member.insert(member.end(), colon.begin(), colon.end());
    member.push_back(value);
    member.push_back(ws());
    const Symbol members =
        b_.repeat("members", b_.choice("member", {member}), 0, -1, {b_.byte(','), ws()});
    return b_.choice("object", {{b_.byte('{'), ws(), members, b_.byte('}')}});
  }

  int count(const Json& schema, const char* key, const std::string& path, int fallback) {
    if (!schema.contains(key)) return fallback;
    const Json& v = schema[key];
    if (!v.is_number_integer() || v.get<long long>() < 0) {
      fail(std::string("'") + key + "' must be a non-negative integer", path, key);
    }
    if (v.get<long long>() > options_.max_repeat) {
      fail(std::string("'") + key + "' above " + std::to_string(options_.max_repeat) +
               " is not supported",
           path, key);
    }
    return int(v.get<long long>());
  }

  Symbol array(const Json& schema, const std::string& path) {
    const Symbol item =
        schema.contains("items") ? compile(schema["items"], path + "/items") : any_value();
    const int min = count(schema, "minItems", path, 0);
    const int max = count(schema, "maxItems", path, -1);
    if (max >= 0 && max < min) fail("'maxItems' is below 'minItems'", path, "maxItems");
    return array_of(item, min, max);
  }

  // Whitespace follows each item, never precedes ']' on its own: one gap, one bound.
  Symbol array_of(Symbol item, int min, int max) {
    const Symbol spaced = b_.choice("item", {{item, ws()}});
    const Symbol items = b_.repeat("items", spaced, min, max, {b_.byte(','), ws()});
    return b_.choice("array", {{b_.byte('['), ws(), items, b_.byte(']')}});
  }

  Symbol string_char() {
    if (string_char_) return *string_char_;
    std::vector<std::vector<Symbol>> alts;
    utf8_sequences(b_, 0x20, 0x21, alts);
    utf8_sequences(b_, 0x23, 0x5B, alts);
    utf8_sequences(b_, 0x5D, kMaxCodePoint, alts);
    ByteSet escaped, hex;
    for (char c : std::string("\"\\/bfnrt")) escaped.add((unsigned char)c);
    hex.add_range('0', '9');
    hex.add_range('a', 'f');
    hex.add_range('A', 'F');
    const Symbol h = b_.byte_set(hex);
    alts.push_back({b_.byte('\\'), b_.byte_set(escaped)});
    alts.push_back({b_.byte('\\'), b_.byte('u'), h, h, h, h});
    string_char_ = b_.choice("char", alts);
    return *string_char_;
  }

  Symbol json_string() {
    if (!any_string_) {
      any_string_ = b_.choice(
          "string", {{b_.byte('"'), b_.repeat("chars", string_char(), 0, -1), b_.byte('"')}});
    }
    return *any_string_;
  }

  Symbol string(const Json& schema, const std::string& path) {
    const int min = count(schema, "minLength", path, 0);
    const int max = count(schema, "maxLength", path, -1);
    if (max >= 0 && max < min) fail("'maxLength' is below 'minLength'", path, "maxLength");
    const bool has_pattern = schema.contains("pattern"), has_format = schema.contains("format");
    if ((has_pattern || has_format) &&
        (schema.contains("minLength") || schema.contains("maxLength"))) {
      fail("'minLength'/'maxLength' together with 'pattern' or 'format' is not supported", path,
           schema.contains("minLength") ? "minLength" : "maxLength");
    }
    if (has_pattern && has_format) {
      fail("'pattern' together with 'format' is not supported", path, "format");
    }
    Symbol content;
    if (has_pattern) {
      if (!schema["pattern"].is_string()) fail("'pattern' must be a string", path, "pattern");
      RegexOptions regex;
      regex.implicit_anchors = false;  // JSON Schema patterns search unless anchored
      regex.json_string_content = true;
      regex.max_depth = options_.max_depth;
      try {
        content = compile_regex(b_, schema["pattern"].get<std::string>(), regex);
      } catch (const StructuredError& e) {
        fail(std::string("'pattern': ") + e.what(), path, "pattern");
      }
    } else if (has_format) {
      const Json& f = schema["format"];
      auto it = f.is_string() ? kFormatRegexes.find(f.get<std::string>()) : kFormatRegexes.end();
      if (it == kFormatRegexes.end()) {
        fail("'format' " + f.dump() + " is not supported", path, "format");
      }
      RegexOptions regex;
      regex.json_string_content = true;
      content = compile_regex(b_, it->second, regex);
    } else if (min == 0 && max < 0) {
      return json_string();
    } else {
      content = b_.repeat("chars", string_char(), min, max);
    }
    return b_.choice("string", {{b_.byte('"'), content, b_.byte('"')}});
  }

  static bool has_numeric_keywords(const Json& schema) {
    for (const char* key : kBoundKeywords) {
      if (schema.contains(key)) return true;
    }
    return schema.contains("multipleOf");
  }

  // integer / number with minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf.
  Symbol bounded_number(const Json& schema, const std::string& path, bool is_integer) {
    if (!has_numeric_keywords(schema)) return is_integer ? integer() : number();
    for (const char* key :
         {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}) {
      if (schema.contains(key) && !schema[key].is_number()) {
        fail(
            std::string("'") + key + "' must be a number" +
                (schema[key].is_boolean() ? " (the boolean form of draft 4 is not supported)" : ""),
            path, key);
      }
    }
    bool integral = is_integer;
    std::int64_t multiple = 0;  // > 1: values must be multiples of it
    if (schema.contains("multipleOf")) {
      const Json& m = schema["multipleOf"];
      const double k = m.get<double>();
      if (!(k > 0)) fail("'multipleOf' must be greater than 0", path, "multipleOf");
      // The range first: casting a double beyond int64 to it is undefined (fuzz_json_schema
      // found multipleOf 1.1e61).
      if (k > double(kMaxMultipleOf) || k != double(std::int64_t(k))) {
        // 0.29 is 29 x 0.01 in decimal but not in binary floating point (0.29 / 0.01 =
        // 28.999999999999996), so validators disagree: refuse rather than guess.
        fail("'multipleOf' must be an integer from 1 to " + std::to_string(kMaxMultipleOf) +
                 " (fractional multiples are not exact in floating point)",
             path, "multipleOf");
      }
      integral = true;
      if (k > 1) multiple = std::int64_t(k);
    }
    const bool has_bounds = std::any_of(std::begin(kBoundKeywords), std::end(kBoundKeywords),
                                        [&](const char* key) { return schema.contains(key); });
    if (multiple > 1 && !has_bounds) return multiples_of(multiple);
    if (!has_bounds) return integer();  // multipleOf 1
    const int scale = integral ? 0 : kNumberFractionDigits;
    const std::int64_t max_bound = integral ? kMaxIntegerBound : kMaxNumberBound;
    ScaledRange range;
    range.fraction_digits = scale;
    // Bounds scaled to the grammar's unit, rounded inwards; exclusive ones moved by one unit.
    const auto bound = [&](const char* key, bool round_up) -> std::optional<std::int64_t> {
      if (!schema.contains(key)) return std::nullopt;
      std::int64_t unit = 1;
      for (int i = 0; i < scale; ++i) unit *= 10;
      const auto v = scale_decimal(schema[key].dump(), scale, round_up, max_bound * unit);
      if (!v) {
        fail(std::string("'") + key + "' beyond +-" + std::to_string(max_bound) +
                 " is not supported for " + (is_integer ? "integers" : "numbers"),
             path, key);
      }
      return v;
    };
    const auto tighter = [](std::optional<std::int64_t> a, std::optional<std::int64_t> b,
                            bool low) -> std::optional<std::int64_t> {
      if (!a) return b;
      if (!b) return a;
      return low ? std::max(*a, *b) : std::min(*a, *b);
    };
    std::optional<std::int64_t> exclusive_low = bound("exclusiveMinimum", false);
    if (exclusive_low) {
      // Rounded down, so "> e" is ">= floor(e) + 1 unit" whether or not e was on the grid.
      *exclusive_low += 1;
    }
    std::optional<std::int64_t> exclusive_high = bound("exclusiveMaximum", true);
    if (exclusive_high) *exclusive_high -= 1;
    range.low = tighter(bound("minimum", true), exclusive_low, true);
    range.high = tighter(bound("maximum", false), exclusive_high, false);
    if (range.low && range.high && *range.low > *range.high) {
      fail(std::string("no ") + (is_integer ? "integer" : "number") +
               " satisfies the bounds (a number grammar writes at most " + std::to_string(scale) +
               " digits after the point)",
           path, schema.contains("maximum") ? "maximum" : "exclusiveMaximum");
    }
    if (multiple > 1) return bounded_multiples(multiple, range, path);
    return compile_number_range(b_, range);
  }

  // The multiples of k in a closed range, listed (few enough: kMaxListedMultiples).
  Symbol bounded_multiples(std::int64_t k, const ScaledRange& range, const std::string& path) {
    if (!range.low || !range.high) {
      fail("'multipleOf' with only one of 'minimum'/'maximum' is not supported (give both)", path,
           "multipleOf");
    }
    // First multiple at or above low (C++ division truncates towards zero).
    std::int64_t first = *range.low / k * k;
    if (first < *range.low) first += k;
    if (first > *range.high)
      fail("no multiple of 'multipleOf' within the bounds", path, "multipleOf");
    if ((*range.high - first) / k >= kMaxListedMultiples) {
      fail("'multipleOf' with more than " + std::to_string(kMaxListedMultiples) +
               " multiples within the bounds is not supported",
           path, "multipleOf");
    }
    std::vector<std::vector<Symbol>> alts;
    for (std::int64_t v = first; v <= *range.high; v += k) {
      alts.push_back({b_.literal(std::to_string(v))});
    }
    return b_.choice("multiples", alts);
  }

  // Integers divisible by k: the remainder of the digits so far is the grammar's state.
  Symbol multiples_of(std::int64_t k) {
    std::vector<int> remainder_rule(static_cast<std::size_t>(k));
    for (auto& r : remainder_rule) r = b_.new_rule("multiple");
    for (std::int64_t r = 0; r < k; ++r) {
      if (r == 0) b_.add_alternative(remainder_rule[0], {});
      for (int d = 0; d <= 9; ++d) {
        b_.add_alternative(remainder_rule[std::size_t(r)],
                           {b_.byte((unsigned char)('0' + d)),
                            Symbol::rule(remainder_rule[std::size_t((r * 10 + d) % k)])});
      }
    }
    std::vector<std::vector<Symbol>> magnitude = {{b_.byte('0')}};
    for (int d = 1; d <= 9; ++d) {
      magnitude.push_back(
          {b_.byte((unsigned char)('0' + d)), Symbol::rule(remainder_rule[std::size_t(d % k)])});
    }
    const Symbol zero_or_positive = b_.choice("multiple", magnitude);
    magnitude.erase(magnitude.begin());  // never "-0"
    return b_.choice("multiples", {{zero_or_positive},
                                   {b_.byte('-'), b_.choice("negative multiple", magnitude)}});
  }

  Symbol digits() {
    ByteSet d;
    d.add_range('0', '9');
    return b_.repeat("digits", b_.byte_set(d), 1, -1);
  }

  Symbol integer() {
    if (integer_) return *integer_;
    ByteSet nonzero, digit;
    nonzero.add_range('1', '9');
    digit.add_range('0', '9');
    const Symbol magnitude = b_.choice(
        "magnitude",
        {{b_.byte('0')}, {b_.byte_set(nonzero), b_.repeat("digits", b_.byte_set(digit), 0, -1)}});
    const Symbol sign = b_.repeat("sign", b_.byte('-'), 0, 1);
    integer_ = b_.choice("integer", {{sign, magnitude}});
    return *integer_;
  }

  Symbol number() {
    if (number_) return *number_;
    ByteSet e, pm;
    e.add('e');
    e.add('E');
    pm.add('+');
    pm.add('-');
    const Symbol fraction =
        b_.repeat("fraction", b_.choice("frac", {{b_.byte('.'), digits()}}), 0, 1);
    const Symbol exponent = b_.repeat(
        "exponent",
        b_.choice("exp", {{b_.byte_set(e), b_.repeat("esign", b_.byte_set(pm), 0, 1), digits()}}),
        0, 1);
    number_ = b_.choice("number", {{integer(), fraction, exponent}});
    return *number_;
  }

  Symbol any_value() {
    if (any_) return *any_;
    const int value = b_.new_rule("value");
    any_ = Symbol::rule(value);
    const Symbol object = object_of(*any_);
    const Symbol array = array_of(*any_, 0, -1);
    for (Symbol s : {object, array, json_string(), number(), b_.literal("true"),
                     b_.literal("false"), b_.literal("null")}) {
      b_.add_alternative(value, {s});
    }
    return *any_;
  }

  GrammarBuilder& b_;
  const Json& root_;
  JsonGrammarOptions options_;
  std::map<std::string, int> refs_;
  int depth_ = 0;  // compile() calls under way
  std::optional<Symbol> ws_, string_char_, any_string_, integer_, number_, any_;
};

}  // namespace

Symbol compile_json_schema(GrammarBuilder& builder, const nlohmann::ordered_json& schema,
                           const JsonGrammarOptions& options) {
  return SchemaCompiler(builder, schema, options).compile(schema, "");
}

Symbol compile_any_json_object(GrammarBuilder& builder, const JsonGrammarOptions& options) {
  const nlohmann::ordered_json root = nlohmann::ordered_json::object();
  return SchemaCompiler(builder, root, options).any_object();
}

}  // namespace nibble::structured

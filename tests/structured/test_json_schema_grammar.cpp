// JSON Schema → grammar: accepted and rejected strings per schema, recursion through $ref,
// the whitespace bound, formats, and refusals naming the keyword.
#include <gtest/gtest.h>

#include "engine/structured/left_recursion.h"

#include "engine/structured/structured_error.h"
#include "tests/structured/grammar_test_util.h"

namespace nibble::structured {
namespace {

using testing::schema;

TEST(JsonSchemaGrammar, StrictObjectKeepsSchemaOrderAndRequiredKeys) {
  const auto g = schema(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"}, "ok": {"type": "boolean"}},
      "required": ["name", "age", "ok"], "additionalProperties": false})");
  EXPECT_TRUE(g.accepts(R"({"name":"Ada","age":36,"ok":true})"));
  EXPECT_TRUE(g.accepts(R"({ "name": "Ada", "age": -3, "ok": false })"));
  EXPECT_FALSE(g.accepts(R"({"age":36,"name":"Ada","ok":true})"));  // schema order
  EXPECT_FALSE(g.accepts(R"({"name":"Ada","ok":true})"));           // missing required
  EXPECT_FALSE(g.accepts(R"({"name":"Ada","age":36.5,"ok":true})"));
  EXPECT_FALSE(g.accepts(R"({"name":"Ada","age":036,"ok":true})"));
  EXPECT_FALSE(g.accepts(R"({"name":"Ada","age":36,"ok":true,"x":1})"));
}

TEST(JsonSchemaGrammar, OptionalPropertiesPlaceCommasRight) {
  const auto g = schema(R"({"type": "object", "properties": {
      "a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
      "required": ["b"]})");
  EXPECT_TRUE(g.accepts(R"({"b":1})"));
  EXPECT_TRUE(g.accepts(R"({"a":0,"b":1})"));
  EXPECT_TRUE(g.accepts(R"({"b":1,"c":2})"));
  EXPECT_TRUE(g.accepts(R"({"a":0,"b":1,"c":2})"));
  EXPECT_FALSE(g.accepts(R"({"a":0})"));
  EXPECT_FALSE(g.accepts(R"({,"b":1})"));
  EXPECT_FALSE(g.accepts(R"({"b":1,})"));
}

TEST(JsonSchemaGrammar, ArraysEnumsConstAnyOfAndTypeArrays) {
  const auto g = schema(R"({"type": "object", "properties": {
      "tags": {"type": "array", "items": {"enum": ["red", "green", 3, null]},
               "minItems": 1, "maxItems": 2},
      "v": {"const": {"k": [1, 2]}},
      "u": {"anyOf": [{"type": "number"}, {"type": "string", "maxLength": 2}]},
      "t": {"type": ["integer", "null"]}},
      "required": ["tags", "v", "u", "t"], "additionalProperties": false})");
  EXPECT_TRUE(g.accepts(R"({"tags":["red"],"v":{"k":[1,2]},"u":1.5e-3,"t":null})"));
  EXPECT_TRUE(g.accepts(R"({"tags":[3, null],"v":{"k":[1,2]},"u":"ab","t":7})"));
  EXPECT_FALSE(g.accepts(R"({"tags":[],"v":{"k":[1,2]},"u":1,"t":null})"));
  EXPECT_FALSE(g.accepts(R"({"tags":["red","red","red"],"v":{"k":[1,2]},"u":1,"t":null})"));
  EXPECT_FALSE(g.accepts(R"({"tags":["blue"],"v":{"k":[1,2]},"u":1,"t":null})"));
  EXPECT_FALSE(g.accepts(R"({"tags":["red"],"v":{"k":[1]},"u":1,"t":null})"));
  EXPECT_FALSE(g.accepts(R"({"tags":["red"],"v":{"k":[1,2]},"u":"abc","t":null})"));
  EXPECT_FALSE(g.accepts(R"({"tags":["red"],"v":{"k":[1,2]},"u":1,"t":1.5})"));
}

TEST(JsonSchemaGrammar, RecursiveRefsThroughDefs) {
  const auto g = schema(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
      "properties": {"value": {"type": "integer"},
                     "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["value", "children"], "additionalProperties": false}}})");
  EXPECT_TRUE(g.accepts(R"({"value":1,"children":[]})"));
  EXPECT_TRUE(g.accepts(
      R"({"value":1,"children":[{"value":2,"children":[{"value":3,"children":[]}]},{"value":4,"children":[]}]})"));
  EXPECT_FALSE(g.accepts(R"({"value":1,"children":[{"value":2}]})"));
  const auto root_ref = schema(R"({"type": "object", "properties": {
      "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}, "required": ["next"],
      "additionalProperties": false})");
  EXPECT_TRUE(root_ref.accepts(R"({"next":{"next":{"next":null}}})"));
  EXPECT_FALSE(root_ref.accepts(R"({"next":{}})"));
  const auto definitions = schema(R"({"definitions": {"id": {"type": "string"}},
      "type": "array", "items": {"$ref": "#/definitions/id"}})");
  EXPECT_TRUE(definitions.accepts(R"(["a","b"])"));
  EXPECT_FALSE(definitions.accepts(R"(["a",1])"));
}

// A reference back to its own schema before any byte is left recursion: the matcher would
// expand it forever (it overflowed the stack: issue 44). Refused at compile time, naming the
// cycle, whether at the root, through $defs, after an empty-able prefix or inside items.
TEST(JsonSchemaGrammar, LeftRecursiveRefsAreRefusedNamingTheCycle) {
  auto refusal = [](const std::string& text) {
    try {
      schema(text);
    } catch (const StructuredError& e) {
      return e.keyword() + " | " + e.what();
    }
    return std::string("accepted");
  };
  const std::string root = refusal(R"({"anyOf": [{"$ref": "#"}, {"type": "string"}]})");
  EXPECT_EQ(root.substr(0, 6), "$ref |") << root;
  EXPECT_NE(root.find("left-recursive"), std::string::npos) << root;
  EXPECT_NE(root.find("'ref #'"), std::string::npos) << root;
  EXPECT_EQ(refusal(R"({"$ref": "#"})").substr(0, 4), "$ref");
  EXPECT_EQ(refusal(R"({"$ref": "#/$defs/a", "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/b"},
      {"type": "null"}]}, "b": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/a"}]}}})")
                .substr(0, 4),
            "$ref");
  EXPECT_EQ(refusal(R"({"type": "array", "items": {"anyOf": [{"$ref": "#/items"},
      {"type": "string"}]}})")
                .substr(0, 4),
            "$ref");
  // Recursion that consumes input first (inside an object or an array) stays allowed.
  EXPECT_EQ(refusal(R"({"anyOf": [{"type": "array", "items": {"$ref": "#"}}, {"type": "null"}]})"),
            "accepted");
}

// Compilation recurses per subschema and per $ref hop: 50,000 nested arrays, or a chain of
// 50,000 $defs each referring to the next, overflowed the stack (issue 44). Both are refused at
// max_depth, naming the limit; a schema as deep as the limit compiles.
TEST(JsonSchemaGrammar, NestingAndRefChainsAreBoundedByMaxDepth) {
  auto nested_items = [](int levels) {
    nlohmann::ordered_json s = {{"type", "integer"}};
    for (int i = 0; i < levels; ++i) s = {{"type", "array"}, {"items", s}};
    return s.dump();
  };
  EXPECT_TRUE(
      schema(nested_items(127)).accepts(std::string(127, '[') + "1" + std::string(127, ']')));
  try {
    schema(nested_items(128));
    ADD_FAILURE() << "129 levels compiled";
  } catch (const StructuredError& e) {
    EXPECT_EQ(e.keyword(), "schema");
    EXPECT_NE(std::string(e.what()).find("more than 128 levels"), std::string::npos) << e.what();
  }
  nlohmann::ordered_json chain = {{"$ref", "#/$defs/d0"},
                                  {"$defs", nlohmann::ordered_json::object()}};
  constexpr int kChain = 50000;
  for (int i = 0; i < kChain; ++i) {
    chain["$defs"]["d" + std::to_string(i)] = {{"$ref", "#/$defs/d" + std::to_string(i + 1)}};
  }
  chain["$defs"]["d" + std::to_string(kChain)] = {{"type", "string"}};
  JsonGrammarOptions big;
  big.max_elements = 10'000'000;  // so that the depth, not the size, is what refuses it
  OutputSpec spec;
  spec.kind = OutputKind::kJsonSchema;
  spec.schema = chain;
  EXPECT_EQ(testing::refused_keyword([&] { testing::compile(spec, big); }), "schema");
  JsonGrammarOptions pattern_depth;
  pattern_depth.max_depth = 4;
  EXPECT_EQ(testing::refused_keyword([&] {
              schema(R"J({"type": "string", "pattern": "((((((a))))))"})J", pattern_depth);
            }),
            "pattern");
}

// The left-recursion check over nullable prefixes: r -> n r 'a' | 'a' with n empty-able.
TEST(LeftRecursion, FoundThroughNullablePrefixesAndOnlyThere) {
  GrammarBuilder b;
  const int n = b.new_rule("n");
  b.add_alternative(n, {b.byte('x')});
  b.add_alternative(n, {});
  const int r = b.new_rule("r");
  b.add_alternative(r, {Symbol::rule(n), Symbol::rule(r), b.byte('a')});
  b.add_alternative(r, {b.byte('a')});
  EXPECT_THROW(check_not_left_recursive(b.build(r)), StructuredError);
  GrammarBuilder right;  // r -> 'x' r | 'a': right recursion is fine
  const int rr = right.new_rule("r");
  right.add_alternative(rr, {right.byte('x'), Symbol::rule(rr)});
  right.add_alternative(rr, {right.byte('a')});
  EXPECT_NO_THROW(check_not_left_recursive(right.build(rr)));
}

TEST(JsonSchemaGrammar, WhitespaceBetweenTokensIsBounded) {
  JsonGrammarOptions options;
  options.max_whitespace = 2;
  const auto g = schema(R"({"type": "array", "items": {"type": "integer"}})", options);
  EXPECT_TRUE(g.accepts("[1,\n 2]"));
  EXPECT_TRUE(g.accepts("[ 1 , 2 ]"));
  EXPECT_FALSE(g.prefix("[1,   "));  // three spaces in one gap
  EXPECT_FALSE(g.prefix("[   "));
  options.max_whitespace = 0;
  const auto compact = schema(R"({"type": "array", "items": {"type": "integer"}})", options);
  EXPECT_TRUE(compact.accepts("[1,2]"));
  EXPECT_FALSE(compact.accepts("[1, 2]"));
}

TEST(JsonSchemaGrammar, StringsEscapesUtf8AndLengths) {
  const auto any = schema(R"({"type": "string"})");
  EXPECT_TRUE(any.accepts(R"("a\"b\\c\n\u00e9 é 😀")"));
  EXPECT_FALSE(any.accepts("\"a\nb\""));  // raw control character
  EXPECT_FALSE(any.accepts(R"("\x")"));
  EXPECT_FALSE(any.accepts("\"\xff\""));  // not UTF-8
  const auto bounded = schema(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  EXPECT_TRUE(bounded.accepts(R"("ab")"));
  EXPECT_TRUE(bounded.accepts(R"("€€€")"));  // characters, not bytes
  EXPECT_FALSE(bounded.accepts(R"("a")"));
  EXPECT_FALSE(bounded.accepts(R"("abcd")"));
}

TEST(JsonSchemaGrammar, PatternAndFormats) {
  const auto anchored = schema(R"({"type": "string", "pattern": "^[A-Z]{2}-\\d+$"})");
  EXPECT_TRUE(anchored.accepts(R"("AB-12")"));
  EXPECT_FALSE(anchored.accepts(R"("xAB-12")"));
  const auto search = schema(R"({"type": "string", "pattern": "\\d\""})");  // unanchored
  EXPECT_TRUE(search.accepts(R"("abc 7\" tall")"));
  EXPECT_FALSE(search.accepts(R"("no digit")"));
  const auto date = schema(R"({"type": "string", "format": "date"})");
  EXPECT_TRUE(date.accepts(R"("2024-01-31")"));
  EXPECT_FALSE(date.accepts(R"("2024-02-30")"));
  EXPECT_FALSE(date.accepts(R"("2024-13-01")"));
  const auto uuid = schema(R"({"type": "string", "format": "uuid"})");
  EXPECT_TRUE(uuid.accepts(R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(uuid.accepts(R"("123e4567")"));
  const auto ip = schema(R"({"type": "string", "format": "ipv4"})");
  EXPECT_TRUE(ip.accepts(R"("192.168.0.255")"));
  EXPECT_FALSE(ip.accepts(R"("192.168.0.256")"));
  const auto when = schema(R"({"type": "string", "format": "date-time"})");
  EXPECT_TRUE(when.accepts(R"("2024-05-06T07:08:09.123Z")"));
  EXPECT_FALSE(when.accepts(R"("2024-05-06 07:08:09")"));
}

TEST(JsonSchemaGrammar, UnsupportedKeywordsAreNamed) {
  auto keyword_of = [](const std::string& text) {
    try {
      schema(text);
    } catch (const StructuredError& e) {
      return e.keyword() + " | " + e.what();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(keyword_of(R"({"type": "number", "multipleOf": 0.01})").substr(0, 13), "multipleOf | ");
  EXPECT_NE(keyword_of(R"({"type": "number", "multipleOf": 0.01})").find("#"), std::string::npos);
  // Beyond int64: refused by its range before any cast (the cast alone was undefined behaviour).
  EXPECT_EQ(keyword_of(R"({"type": "number", "multipleOf": 1.1e61})").substr(0, 13),
            "multipleOf | ");
  EXPECT_EQ(keyword_of(R"({"oneOf": [{"type": "string"}]})").substr(0, 5), "oneOf");
  EXPECT_EQ(keyword_of(R"({"type": "object", "properties": {"a": {"type": "string",
      "patternProperties": {}}}})")
                .substr(0, 17),
            "patternProperties");
  EXPECT_EQ(keyword_of(R"({"type": "string", "format": "iri"})").substr(0, 6), "format");
  EXPECT_EQ(keyword_of(R"({"$ref": "https://example.com/s.json"})").substr(0, 4), "$ref");
  EXPECT_EQ(keyword_of(R"({"$ref": "#/$defs/missing"})").substr(0, 4), "$ref");
  EXPECT_EQ(keyword_of(R"({"type": "object", "properties": {}, "required": ["x"]})").substr(0, 8),
            "required");
  EXPECT_EQ(keyword_of(R"({"type": "strin"})").substr(0, 4), "type");
}

TEST(JsonSchemaGrammar, JsonObjectAndEmptySchemaAcceptAnyJson) {
  OutputSpec spec;
  spec.kind = OutputKind::kJsonObject;
  const auto object = testing::compile(spec);
  EXPECT_TRUE(object.accepts(R"({"a":[1,{"b":null}],"c":"d"})"));
  EXPECT_TRUE(object.accepts("{}"));
  EXPECT_FALSE(object.accepts("[1]"));
  EXPECT_FALSE(object.accepts(R"({"a":tru})"));
  const auto any = schema("{}");
  EXPECT_TRUE(any.accepts("[1, \"x\", false]"));
  EXPECT_TRUE(any.accepts("-0.5E+10"));
}

TEST(ToolCallGrammar, RequiredIsVllmsArrayOfCallsAndNamedTheArgumentsAlone) {
  OutputSpec spec;
  spec.kind = OutputKind::kToolCall;
  spec.tools.functions = {
      {"get_weather", nlohmann::ordered_json::parse(
                          R"({"type":"object","properties":{"city":{"type":"string"}},
                              "required":["city"],"additionalProperties":false})")},
      {"now", nlohmann::ordered_json::parse(
                  R"({"type":"object","properties":{},"additionalProperties":false})")}};
  const auto single = testing::compile(spec);
  const std::string weather = R"({"name": "get_weather", "parameters": {"city": "Paris"}})";
  const std::string now = R"({"name": "now", "parameters": {}})";
  EXPECT_TRUE(single.accepts("[" + weather + "]"));
  EXPECT_TRUE(single.accepts("[" + now + "]"));
  EXPECT_FALSE(single.accepts(weather)) << "the calls are a list";
  EXPECT_FALSE(single.accepts("[]")) << "at least one call";
  EXPECT_FALSE(single.accepts("[" + weather + ", " + now + "]"));
  EXPECT_FALSE(single.accepts(R"([{"name": "now", "parameters": {"city": "x"}}])"));
  EXPECT_FALSE(single.accepts(R"([{"name": "other", "parameters": {}}])"));
  spec.tools.parallel = true;
  const auto parallel = testing::compile(spec);
  EXPECT_TRUE(parallel.accepts("[" + weather + ", " + now + ", " + weather + "]"));

  OutputSpec named;
  named.kind = OutputKind::kToolCall;
  named.tools.named = true;
  named.tools.functions = {spec.tools.functions[0]};
  const auto arguments = testing::compile(named);
  EXPECT_TRUE(arguments.accepts(R"({"city": "Paris"})"));
  EXPECT_FALSE(arguments.accepts("[" + weather + "]"));
  EXPECT_FALSE(arguments.accepts("{}"));
  EXPECT_NE(named.cache_key(), spec.cache_key());
}

}  // namespace
}  // namespace nibble::structured

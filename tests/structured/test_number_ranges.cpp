// Numeric bounds in the grammar: every integer and fixed-point string in a window is accepted
// exactly when its value is in the range (brute force against arithmetic), bounds given as
// JSON numbers are rounded inwards, and what cannot be exact is refused naming the keyword.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "engine/structured/number_range_grammar.h"
#include "engine/structured/structured_error.h"
#include "tests/structured/grammar_test_util.h"

namespace nibble::structured {
namespace {

using testing::schema;

struct RangeMatcher {
  Grammar grammar;
  std::unique_ptr<GrammarMatcher> matcher;
};

RangeMatcher range_grammar(const ScaledRange& range) {
  GrammarBuilder b;
  const int root = b.new_rule("root");
  b.add_alternative(root, {compile_number_range(b, range)});
  RangeMatcher m{b.build(root), nullptr};
  m.matcher = std::make_unique<GrammarMatcher>(m.grammar);
  return m;
}

std::string describe(const ScaledRange& r) {
  return "[" + (r.low ? std::to_string(*r.low) : std::string("-inf")) + ", " +
         (r.high ? std::to_string(*r.high) : std::string("inf")) + "] scale " +
         std::to_string(r.fraction_digits);
}

TEST(NumberRanges, IntegersInAWindowMatchArithmetic) {
  const std::optional<std::int64_t> none;
  const std::vector<std::pair<std::optional<std::int64_t>, std::optional<std::int64_t>>> ranges = {
      {0, 0},    {3, 17},       {-17, -3},   {-5, 5},      {7, 1234},
      {95, 105}, {-1000, -999}, {100, 999},  {0, none},    {42, none},
      {none, 0}, {none, -9},    {none, 250}, {-250, none}, {none, none}};
  for (const auto& [low, high] : ranges) {
    const ScaledRange range{low, high, 0};
    const RangeMatcher m = range_grammar(range);
    for (int v = -1300; v <= 1300; ++v) {
      const bool inside = (!low || v >= *low) && (!high || v <= *high);
      ASSERT_EQ(m.matcher->accepts(std::to_string(v)), inside) << v << " in " << describe(range);
    }
    for (const char* never : {"-0", "00", "01", "-01", "1.0", "1e2", "+1", "-", ""}) {
      EXPECT_FALSE(m.matcher->accepts(never)) << never << " in " << describe(range);
    }
  }
}

TEST(NumberRanges, FixedPointInAWindowMatchesArithmetic) {
  // Scale 2: values are hundredths; every string "I", "I.d", "I.dd" for |I| <= 12.
  const std::optional<std::int64_t> none;
  const std::vector<std::pair<std::optional<std::int64_t>, std::optional<std::int64_t>>> ranges = {
      {0, 100},  {-250, 375}, {1, 99},    {150, 150}, {-1, 1},     {305, 1190},
      {-99, -1}, {50, none},  {none, 70}, {-1, none}, {none, none}};
  for (const auto& [low, high] : ranges) {
    const ScaledRange range{low, high, 2};
    const RangeMatcher m = range_grammar(range);
    for (int i = -12; i <= 12; ++i) {
      for (int digits = 0; digits <= 2; ++digits) {
        for (int f = 0; f < (digits == 0 ? 1 : digits == 1 ? 10 : 100); ++f) {
          for (int negative_zero = 0; negative_zero < (i == 0 ? 2 : 1); ++negative_zero) {
            char text[32];
            const char* sign = negative_zero ? "-" : "";
            if (digits == 0) std::snprintf(text, sizeof text, "%s%d", sign, i);
            if (digits == 1) std::snprintf(text, sizeof text, "%s%d.%d", sign, i, f);
            if (digits == 2) std::snprintf(text, sizeof text, "%s%d.%02d", sign, i, f);
            const int magnitude = (i < 0 ? -i : i) * 100 + (digits == 1 ? f * 10 : f);
            const bool negative = i < 0 || negative_zero;
            const int value = negative ? -magnitude : magnitude;
            // "-0", "-0.0": the grammar never writes a negative zero.
            const bool inside =
                (!low || value >= *low) && (!high || value <= *high) && !(negative && value == 0);
            ASSERT_EQ(m.matcher->accepts(text), inside) << text << " in " << describe(range);
          }
        }
      }
    }
    EXPECT_FALSE(m.matcher->accepts("1.234")) << "three digits after the point at scale 2";
    EXPECT_FALSE(m.matcher->accepts("1.")) << describe(range);
  }
}

TEST(NumberRanges, DecimalBoundsScaleExactly) {
  const std::int64_t big = 1'000'000'000'000'000;
  EXPECT_EQ(scale_decimal("0.1", 6, true, big), 100000);
  EXPECT_EQ(scale_decimal("-2.5e3", 0, true, big), -2500);
  EXPECT_EQ(scale_decimal("1e-7", 6, true, big), 1);
  EXPECT_EQ(scale_decimal("1e-7", 6, false, big), 0);
  EXPECT_EQ(scale_decimal("-1e-7", 6, true, big), 0);
  EXPECT_EQ(scale_decimal("-1e-7", 6, false, big), -1);
  EXPECT_EQ(scale_decimal("2.5", 0, true, big), 3);
  EXPECT_EQ(scale_decimal("-2.5", 0, true, big), -2);
  EXPECT_EQ(scale_decimal("1.5E+2", 0, false, big), 150);
  EXPECT_EQ(scale_decimal("0", 6, true, big), 0);
  EXPECT_EQ(scale_decimal("1e300", 0, true, big), std::nullopt);
  EXPECT_EQ(scale_decimal("2000", 0, true, 1999), std::nullopt);
}

TEST(NumberRanges, SchemaIntegerBounds) {
  const auto g = schema(R"({"type": "integer", "minimum": 3, "exclusiveMaximum": 17})");
  EXPECT_TRUE(g.accepts("3"));
  EXPECT_TRUE(g.accepts("16"));
  EXPECT_FALSE(g.accepts("17"));
  EXPECT_FALSE(g.accepts("2"));
  EXPECT_FALSE(g.accepts("-3"));
  // Bounds between integers round inwards; exclusive ones on an integer move by one.
  const auto h = schema(R"({"type": "integer", "exclusiveMinimum": 0.5, "maximum": 9.9})");
  EXPECT_FALSE(h.accepts("0"));
  EXPECT_TRUE(h.accepts("1"));
  EXPECT_TRUE(h.accepts("9"));
  EXPECT_FALSE(h.accepts("10"));
  const auto neg = schema(R"({"type": "integer", "exclusiveMinimum": -3, "maximum": -1})");
  EXPECT_TRUE(neg.accepts("-2"));
  EXPECT_FALSE(neg.accepts("-3"));
  EXPECT_FALSE(neg.accepts("0"));
}

TEST(NumberRanges, SchemaNumberBounds) {
  const auto p = schema(R"({"type": "number", "minimum": 0, "maximum": 1})");
  for (const char* yes : {"0", "0.5", "1", "1.0", "1.000000", "0.000001", "0.25"}) {
    EXPECT_TRUE(p.accepts(yes)) << yes;
  }
  for (const char* no : {"1.000001", "1.5", "-0.1", "-0", "1e0", "0.0000001", "2"}) {
    EXPECT_FALSE(p.accepts(no)) << no;
  }
  const auto t =
      schema(R"({"type": "number", "exclusiveMinimum": -0.5, "exclusiveMaximum": 40.1})");
  EXPECT_TRUE(t.accepts("-0.499999"));
  EXPECT_FALSE(t.accepts("-0.5"));
  EXPECT_TRUE(t.accepts("40.099999"));
  EXPECT_FALSE(t.accepts("40.1"));
  EXPECT_FALSE(t.accepts("40.100000"));
  // Without a type, numeric keywords mean a number.
  const auto any = schema(R"({"maximum": 10})");
  EXPECT_TRUE(any.accepts("-1234.5"));
  EXPECT_FALSE(any.accepts("10.5"));
}

TEST(NumberRanges, MultipleOfIntegers) {
  const auto g = schema(R"({"type": "integer", "multipleOf": 7})");
  for (int v = -200; v <= 200; ++v) {
    EXPECT_EQ(g.accepts(std::to_string(v)), v % 7 == 0) << v;
  }
  EXPECT_FALSE(g.accepts("-0"));
  const auto r = schema(R"({"type": "integer", "multipleOf": 5, "minimum": -12, "maximum": 23})");
  for (int v = -40; v <= 40; ++v) {
    EXPECT_EQ(r.accepts(std::to_string(v)), v % 5 == 0 && v >= -12 && v <= 23) << v;
  }
  const auto n = schema(R"({"type": "number", "multipleOf": 1, "minimum": 2, "maximum": 4})");
  EXPECT_TRUE(n.accepts("3"));
  EXPECT_FALSE(n.accepts("3.5"));
}

TEST(NumberRanges, InexactOrEmptyBoundsAreRefusedNamingTheKeyword) {
  auto keyword_of = [](const std::string& text) {
    return testing::refused_keyword([&] { schema(text); });
  };
  EXPECT_EQ(keyword_of(R"({"type": "number", "multipleOf": 0.01})"), "multipleOf");
  EXPECT_EQ(keyword_of(R"({"type": "integer", "multipleOf": 5, "minimum": 1})"), "multipleOf");
  EXPECT_EQ(keyword_of(R"({"type": "integer", "multipleOf": 5, "minimum": 1, "maximum": 1e6})"),
            "multipleOf");
  EXPECT_EQ(keyword_of(R"({"type": "integer", "multipleOf": 5, "minimum": 1, "maximum": 4})"),
            "multipleOf");
  EXPECT_EQ(keyword_of(R"({"type": "integer", "multipleOf": 0})"), "multipleOf");
  EXPECT_EQ(keyword_of(R"({"type": "integer", "exclusiveMinimum": true})"), "exclusiveMinimum");
  EXPECT_EQ(keyword_of(R"({"type": "number", "maximum": 1e12})"), "maximum");
  EXPECT_EQ(keyword_of(R"({"type": "integer", "minimum": 1e20})"), "minimum");
  EXPECT_EQ(keyword_of(R"({"type": "integer", "minimum": 5, "maximum": 4})"), "maximum");
  EXPECT_EQ(keyword_of(R"({"type": "integer", "exclusiveMinimum": 4, "exclusiveMaximum": 5})"),
            "exclusiveMaximum");
  EXPECT_EQ(keyword_of(R"({"type": "number", "minimum": 1, "maximum": 1})"), "accepted");
}

}  // namespace
}  // namespace nibble::structured

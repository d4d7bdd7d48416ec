#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "metrics/exposition.h"

namespace nibble::metrics {
namespace {

TEST(Exposition, EscapesHelpText) {
  EXPECT_EQ(escape_help("a\\b\nc \"quoted\""), "a\\\\b\\nc \"quoted\"");
}

TEST(Exposition, EscapesLabelValues) {
  EXPECT_EQ(escape_label_value("a\\b\nc \"q\""), "a\\\\b\\nc \\\"q\\\"");
  EXPECT_EQ(escape_label_value("plain ünïcode"), "plain ünïcode");
}

TEST(Exposition, FormatsValues) {
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(42), "42");
  EXPECT_EQ(format_value(-1.5), "-1.5");
  EXPECT_EQ(format_value(0.1), "0.1");
  EXPECT_EQ(format_value(1e-9), "1e-09");
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_value(std::nan("")), "NaN");
  // Round trip: the text reads back as the same double.
  for (double v : {1.0 / 3, 123456789.123, 6.02214076e23, 2.5e-300}) {
    EXPECT_EQ(std::stod(format_value(v)), v);
  }
}

TEST(Exposition, SampleLine) {
  std::string out;
  append_sample(out, "m", {}, 1);
  append_sample(out, "m", {{"a", "x"}, {"b", "y\"z"}}, 2.5);
  EXPECT_EQ(out, "m 1\nm{a=\"x\",b=\"y\\\"z\"} 2.5\n");
}

}  // namespace
}  // namespace nibble::metrics

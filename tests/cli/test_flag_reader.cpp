// cli::FlagReader's values (integers, lists of them, numbers) and parse_integer, in range or
// refused by name.
#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/flag_reader.h"

namespace nibble::cli {
namespace {

// A reader over one flag and its value, moved onto the flag.
struct OneFlag {
  explicit OneFlag(std::string value) : args{"prog", "--x", std::move(value)} {
    for (std::string& a : args) argv.push_back(a.data());
  }
  FlagReader reader() {
    FlagReader r("prog", int(argv.size()), argv.data());
    EXPECT_TRUE(r.next());
    return r;
  }
  std::vector<std::string> args;
  std::vector<char*> argv;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(FlagReader, ParseIntegerTakesWholeNumbersInRangeOnly) {
  EXPECT_EQ(parse_integer("8", 1, 8), 8);
  EXPECT_EQ(parse_integer("-3", -5, 5), -3);
  for (const char* bad : {"", "0", "9", "8x", "x8", "1.5", "99999999999999999999"})
    EXPECT_FALSE(parse_integer(bad, 1, 8).has_value()) << bad;
}

TEST(FlagReader, IntegerListsInRange) {
  OneFlag ok("1,2,64");
  auto r = ok.reader();
  EXPECT_EQ(r.integers(1, 64), (std::vector<long long>{1, 2, 64}));
  for (const char* bad : {"", "1,", ",1", "1,,2", "0,1", "1,65", "1;2", "1,2x", "a"}) {
    OneFlag f(bad);
    auto reader = f.reader();
    const std::string e = error_of([&] { reader.integers(1, 64); });
    EXPECT_NE(e.find("prog: --x expects comma-separated integers from 1 to 64, got '" +
                     std::string(bad) + "'"),
              std::string::npos)
        << bad << ": " << e;
  }
}

TEST(FlagReader, NumbersInRange) {
  OneFlag ok("2.176");
  auto r = ok.reader();
  EXPECT_DOUBLE_EQ(r.number(0.001, 10), 2.176);
  for (const char* bad : {"", "0", "11", "2.1ms", "nan", "x"}) {
    OneFlag f(bad);
    auto reader = f.reader();
    const std::string e = error_of([&] { reader.number(0.001, 10); });
    EXPECT_NE(e.find("prog: --x expects a number from"), std::string::npos) << bad << ": " << e;
  }
}

}  // namespace
}  // namespace nibble::cli

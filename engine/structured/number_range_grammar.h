#pragma once
// Numbers in a range as grammar rules over their decimal digits, so that bounds are enforced
// by the grammar rather than checked afterwards. A range of integers is a finite automaton
// over digits: for each digit count, the strings between the low and high bound of that
// length, built digit by digit (the classic range-to-regex split, written here).
//
// Values are fixed-point: an integer N stands for N / 10^fraction_digits and is written
// "I" or "I.f" with 1..fraction_digits digits after the point (trailing zeros allowed, no
// exponent, no leading zeros, never "-0"). fraction_digits = 0 gives JSON integers.
#include <cstdint>
#include <optional>

#include "engine/structured/grammar.h"

namespace nibble::structured {

struct ScaledRange {
  std::optional<std::int64_t> low;   // inclusive; nullopt: unbounded
  std::optional<std::int64_t> high;  // inclusive; nullopt: unbounded
  int fraction_digits = 0;           // 0..9
};

// Every value in [low, high] written as above; the range must not be empty.
Symbol compile_number_range(GrammarBuilder& builder, const ScaledRange& range);

// `text` (a JSON number as written, e.g. "-2.5e3") times 10^scale, rounded up (ceil) or down;
// nullopt if the result does not fit within +-max_abs.
std::optional<std::int64_t> scale_decimal(const std::string& text, int scale, bool round_up,
                                          std::int64_t max_abs);

}  // namespace nibble::structured

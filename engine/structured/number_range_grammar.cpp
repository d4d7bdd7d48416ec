#include "engine/structured/number_range_grammar.h"

#include <string>
#include <vector>

#include "engine/structured/structured_error.h"

namespace nibble::structured {
namespace {

using Alternatives = std::vector<std::vector<Symbol>>;
// An upper bound that is no bound (GCC's optional analysis misfires on optional<uint64_t>).
constexpr std::uint64_t kUnbounded = ~std::uint64_t(0);

class RangeBuilder {
 public:
  explicit RangeBuilder(GrammarBuilder& b) : b_(b) {}

  Symbol digit_range(char lo, char hi) {
    ByteSet set;
    set.add_range((unsigned char)lo, (unsigned char)hi);
    return b_.byte_set(set);
  }

  // Digit strings of x's length between x and y (same length, x <= y), leading zeros allowed.
  void same_length(const std::string& x, const std::string& y, std::vector<Symbol> prefix,
                   Alternatives& out) {
    if (x.empty()) {
      out.push_back(prefix);
      return;
    }
    const std::string xs = x.substr(1), ys = y.substr(1);
    const bool free_rest = xs.find_first_not_of('0') == std::string::npos &&
                           ys.find_first_not_of('9') == std::string::npos;
    if (x[0] == y[0] || free_rest) {
      prefix.push_back(digit_range(x[0], y[0]));
      if (x[0] == y[0]) return same_length(xs, ys, prefix, out);
      for (std::size_t i = 0; i < xs.size(); ++i) prefix.push_back(digit_range('0', '9'));
      out.push_back(prefix);
      return;
    }
    std::vector<Symbol> low = prefix;
    low.push_back(digit_range(x[0], x[0]));
    same_length(xs, std::string(xs.size(), '9'), low, out);
    if (x[0] + 1 <= y[0] - 1) {
      std::vector<Symbol> middle = prefix;
      middle.push_back(digit_range(char(x[0] + 1), char(y[0] - 1)));
      for (std::size_t i = 0; i < xs.size(); ++i) middle.push_back(digit_range('0', '9'));
      out.push_back(middle);
    }
    std::vector<Symbol> high = prefix;
    high.push_back(digit_range(y[0], y[0]));
    same_length(std::string(ys.size(), '0'), ys, high, out);
  }

  // Naturals in [a, b] without leading zeros (b nullopt: unbounded).
  Symbol natural(std::uint64_t a, std::uint64_t b) {
    Alternatives alts;
    const std::string sa = std::to_string(a);
    const bool bounded = b != kUnbounded;
    const std::size_t max_len = bounded ? std::to_string(b).size() : sa.size();
    for (std::size_t len = sa.size(); len <= max_len; ++len) {
      const std::string lo = len == sa.size() ? sa : "1" + std::string(len - 1, '0');
      const std::string hi = bounded && len == max_len ? std::to_string(b) : std::string(len, '9');
      same_length(lo, hi, {}, alts);
    }
    if (!bounded) {  // longer than a: any digits after a non-zero one
      std::vector<Symbol> longer = {digit_range('1', '9')};
      for (std::size_t i = 0; i < sa.size(); ++i) longer.push_back(digit_range('0', '9'));
      longer.push_back(b_.repeat("digits", digit_range('0', '9'), 0, -1));
      alts.push_back(longer);
    }
    return b_.choice("natural", alts);
  }

  // ".f" with 1..x.size() digits whose zero-padded value is in [x, y] (strings of equal
  // length); `with_empty` adds the empty string (the value 0, written without a point).
  Symbol fraction(const std::string& x, const std::string& y, bool with_empty) {
    Alternatives alts;
    if (with_empty) alts.push_back({});
    alts.push_back({b_.byte('.'), fraction_digits(x, y)});
    return b_.choice("fraction", alts);
  }

  // Non-empty digit strings p, at most x.size() long, with pad(p) in [x, y].
  Symbol fraction_digits(const std::string& x, const std::string& y) {
    Alternatives alts;
    const std::string xs = x.substr(1), ys = y.substr(1);
    const bool x_rest_zero = xs.find_first_not_of('0') == std::string::npos;
    for (int part = 0; part < 3; ++part) {
      // part 0: the digit x[0]; 1: digits strictly between; 2: y[0] (if different).
      char lo = 0, hi = 0;
      if (part == 0) lo = hi = x[0];
      if (part == 1) lo = char(x[0] + 1), hi = char(y[0] - 1);
      if (part == 2) lo = hi = y[0];
      if (lo > hi || (part == 2 && x[0] == y[0])) continue;
      const Symbol digit = digit_range(lo, hi);
      // The digit alone pads to d000...: at least x unless it is x[0] with more to come.
      if (part != 0 || x_rest_zero) alts.push_back({digit});
      if (xs.empty()) continue;
      const std::string nx = part == 0 ? xs : std::string(xs.size(), '0');
      const std::string ny =
          part == 2 || (part == 0 && x[0] == y[0]) ? ys : std::string(ys.size(), '9');
      alts.push_back({digit, fraction_digits(nx, ny)});
    }
    return b_.choice("fraction digits", alts);
  }

  // Non-negative values in [a, b] (scaled by 10^s).
  Symbol non_negative(std::uint64_t a, std::uint64_t b, int s) {
    if (s == 0) return natural(a, b);
    std::uint64_t unit = 1;
    for (int i = 0; i < s; ++i) unit *= 10;
    const std::uint64_t ia = a / unit, fa = a % unit;
    const auto pad = [s](std::uint64_t f) {
      std::string t = std::to_string(f);
      return std::string(std::size_t(s) - t.size(), '0') + t;
    };
    const std::string zeros(std::size_t(s), '0'), nines(std::size_t(s), '9');
    Alternatives alts;
    if (b != kUnbounded && b / unit == ia) {
      alts.push_back({natural(ia, ia), fraction(pad(fa), pad(b % unit), fa == 0)});
      return b_.choice("fixed point", alts);
    }
    alts.push_back({natural(ia, ia), fraction(pad(fa), nines, fa == 0)});
    if (b == kUnbounded) {
      alts.push_back({natural(ia + 1, kUnbounded), fraction(zeros, nines, true)});
      return b_.choice("fixed point", alts);
    }
    const std::uint64_t ib = b / unit;  // > ia
    if (ia + 1 <= ib - 1) alts.push_back({natural(ia + 1, ib - 1), fraction(zeros, nines, true)});
    alts.push_back({natural(ib, ib), fraction(zeros, pad(b % unit), true)});
    return b_.choice("fixed point", alts);
  }

 private:
  GrammarBuilder& b_;
};

}  // namespace

Symbol compile_number_range(GrammarBuilder& builder, const ScaledRange& range) {
  if (range.fraction_digits < 0 || range.fraction_digits > 9) {
    throw StructuredError("fraction digits must be 0..9");
  }
  if (range.low && range.high && *range.low > *range.high) {
    throw StructuredError("the range is empty");
  }
  RangeBuilder r(builder);
  const int s = range.fraction_digits;
  Alternatives alts;
  if (!range.high || *range.high >= 0) {
    const std::uint64_t a = range.low && *range.low > 0 ? std::uint64_t(*range.low) : 0;
    alts.push_back({r.non_negative(a, range.high ? std::uint64_t(*range.high) : kUnbounded, s)});
  }
  if (!range.low || *range.low < 0) {
    // Magnitudes of the negative values, from at least 1 (so never "-0").
    const std::uint64_t a = range.high && *range.high < 0 ? std::uint64_t(-*range.high) : 1;
    const std::uint64_t b = range.low ? std::uint64_t(-*range.low) : kUnbounded;
    alts.push_back({builder.byte('-'), r.non_negative(a, b, s)});
  }
  return builder.choice("number range", alts);
}

std::optional<std::int64_t> scale_decimal(const std::string& text, int scale, bool round_up,
                                          std::int64_t max_abs) {
  // value = digits * 10^exponent, digits without sign or point.
  std::size_t i = 0;
  const bool negative = i < text.size() && text[i] == '-';
  if (negative) ++i;
  std::string digits;
  long exponent = 0;
  bool after_point = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c >= '0' && c <= '9') {
      digits.push_back(c);
      if (after_point) --exponent;
    } else if (c == '.') {
      after_point = true;
    } else if (c == 'e' || c == 'E') {
      try {
        exponent += std::stol(text.substr(i + 1));
      } catch (const std::exception&) {
        return std::nullopt;
      }
      break;
    } else {
      return std::nullopt;
    }
  }
  const std::size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return 0;
  digits = digits.substr(first);
  exponent += scale;
  // Magnitude rounded towards zero plus whether anything was cut off.
  bool inexact = false;
  if (exponent < 0) {
    const std::size_t cut = std::size_t(-exponent);
    if (cut >= digits.size()) {
      inexact = true;
      digits = "0";
    } else {
      inexact = digits.find_first_not_of('0', digits.size() - cut) != std::string::npos;
      digits.resize(digits.size() - cut);
    }
    exponent = 0;
  }
  if (digits.size() + std::size_t(exponent) > 18) return std::nullopt;
  std::int64_t magnitude = std::stoll(digits);
  for (long e = 0; e < exponent; ++e) magnitude *= 10;
  // Rounding away from zero: up for positive values, down for negative ones.
  if (inexact && round_up != negative) ++magnitude;
  if (magnitude > max_abs) return std::nullopt;
  return negative ? -magnitude : magnitude;
}

}  // namespace nibble::structured

#pragma once
// A command-line flag reader shared by the tools (nibble-make-model, nibble-quantize) and the
// controller's `nibble render` / Kubernetes render flags: walks `--flag value`, `--flag=value`
// and bare switches, and turns every mistake (missing value, number out of range, unknown
// flag) into std::invalid_argument naming the program and the flag, so each parser only maps
// flags to fields.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nibble::cli {

// text as a whole integer in [lo, hi] (nothing after the digits), else nullopt: the check behind
// every integer flag, for parsers that word their own errors.
std::optional<long long> parse_integer(const std::string& text, long long lo, long long hi);

class FlagReader {
 public:
  FlagReader(std::string program, int argc, char** argv);

  // Moves to the next flag; false when the arguments are used up.
  bool next();
  bool is(std::string_view flag) const { return flag_ == flag; }
  const std::string& flag() const { return flag_; }

  // The current flag's value: after '=' or the next argument.
  std::string value();
  long long integer(long long lo, long long hi);
  // A comma-separated list of integers in [lo, hi], at least one.
  std::vector<long long> integers(long long lo, long long hi);
  // A decimal number in [lo, hi].
  double number(double lo, double hi);
  [[noreturn]] void unknown() const;
  // Arguments consumed so far (the flag and its value, if it took one from the next argument).
  std::size_t consumed() const { return next_; }

 private:
  std::string program_;
  std::vector<std::string> args_;
  std::size_t next_ = 0;
  std::string flag_;
  std::string inline_value_;
  bool has_inline_value_ = false;
};

// The whole command line: --help/-h prints `usage` and exits 0; each other flag goes to
// `on_flag`, which returns false for a flag it does not know. Errors are printed on stderr;
// returns false after one.
bool parse_flags(const std::string& program, const char* usage, int argc, char** argv,
                 const std::function<bool(FlagReader&)>& on_flag);

// The flags every model-writing tool takes: --threads N and --max-shard-mb N. Returns false when
// the current flag is neither.
bool take_model_writer_flag(FlagReader& flags, int& threads, std::size_t& max_shard_bytes);

}  // namespace nibble::cli

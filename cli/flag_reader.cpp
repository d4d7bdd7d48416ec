#include "cli/flag_reader.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>

namespace nibble::cli {

FlagReader::FlagReader(std::string program, int argc, char** argv)
    : program_(std::move(program)),
      args_(argv + (argc > 0 ? 1 : 0), argv + (argc > 0 ? argc : 0)) {}

bool FlagReader::next() {
  if (next_ >= args_.size()) return false;
  flag_ = args_[next_++];
  has_inline_value_ = false;
  if (flag_.rfind("--", 0) == 0) {
    if (const auto eq = flag_.find('='); eq != std::string::npos) {
      inline_value_ = flag_.substr(eq + 1);
      flag_.resize(eq);
      has_inline_value_ = true;
    }
  } else if (flag_.empty() || flag_[0] != '-') {
    throw std::invalid_argument(program_ + ": unexpected argument '" + flag_ + "' (flags only)");
  }
  return true;
}

std::string FlagReader::value() {
  if (has_inline_value_) return inline_value_;
  if (next_ >= args_.size())
    throw std::invalid_argument(program_ + ": " + flag_ + " needs a value");
  return args_[next_++];
}

std::optional<long long> parse_integer(const std::string& text, long long lo, long long hi) {
  std::size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (text.empty() || used != text.size() || n < lo || n > hi) return std::nullopt;
  return n;
}

long long FlagReader::integer(long long lo, long long hi) {
  const std::string v = value();
  const auto n = parse_integer(v, lo, hi);
  if (!n)
    throw std::invalid_argument(program_ + ": " + flag_ + " expects an integer from " +
                                std::to_string(lo) + " to " + std::to_string(hi) + ", got '" + v +
                                "'");
  return *n;
}

std::vector<long long> FlagReader::integers(long long lo, long long hi) {
  const std::string v = value();
  std::vector<long long> out;
  std::size_t at = 0;
  while (true) {
    const std::size_t comma = v.find(',', at);
    const auto n = parse_integer(v.substr(at, comma - at), lo, hi);
    if (!n)
      throw std::invalid_argument(program_ + ": " + flag_ +
                                  " expects comma-separated integers from " + std::to_string(lo) +
                                  " to " + std::to_string(hi) + ", got '" + v + "'");
    out.push_back(*n);
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

double FlagReader::number(double lo, double hi) {
  const std::string v = value();
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size() || !(x >= lo && x <= hi))
    throw std::invalid_argument(program_ + ": " + flag_ + " expects a number from " +
                                std::to_string(lo) + " to " + std::to_string(hi) + ", got '" + v +
                                "'");
  return x;
}

void FlagReader::unknown() const {
  throw std::invalid_argument(program_ + ": unknown option " + flag_ + " (see --help)");
}

bool parse_flags(const std::string& program, const char* usage, int argc, char** argv,
                 const std::function<bool(FlagReader&)>& on_flag) {
  try {
    FlagReader flags(program, argc, argv);
    while (flags.next()) {
      if (flags.is("--help") || flags.is("-h")) {
        std::fputs(usage, stdout);
        std::exit(0);
      }
      if (!on_flag(flags)) flags.unknown();
    }
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return false;
  }
  return true;
}

bool take_model_writer_flag(FlagReader& flags, int& threads, std::size_t& max_shard_bytes) {
  if (flags.is("--threads")) {
    threads = static_cast<int>(flags.integer(1, 4096));
  } else if (flags.is("--max-shard-mb")) {
    max_shard_bytes = static_cast<std::size_t>(flags.integer(1, 1 << 20)) << 20;
  } else {
    return false;
  }
  return true;
}

}  // namespace nibble::cli

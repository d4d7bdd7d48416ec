#pragma once
// Python str methods on UTF-8 strings, per code point like Python: strip family, split,
// replace, case mapping (ASCII only; non-ASCII letters throw rather than map wrongly).
#include <optional>
#include <string>
#include <vector>

namespace nibble::chat {

// Python's str.isspace() for one code point.
bool is_python_space(char32_t cp);

enum class StripSide { Both, Left, Right };
// chars == nullopt: strip Python whitespace; else any code point in *chars.
std::string py_strip(const std::string& s, const std::optional<std::string>& chars, StripSide side);
// sep == nullopt: split on whitespace runs. maxsplit < 0: unlimited. Throws on an empty sep.
std::vector<std::string> py_split(const std::string& s, const std::optional<std::string>& sep,
                                  long maxsplit);
std::vector<std::string> py_rsplit(const std::string& s, const std::string& sep, long maxsplit);
std::string py_replace(const std::string& s, const std::string& old, const std::string& with,
                       long count);
// Returns nullopt when s holds non-ASCII text (the caller reports it as unsupported).
std::optional<std::string> ascii_upper(const std::string& s);
std::optional<std::string> ascii_lower(const std::string& s);
std::optional<std::string> ascii_capitalize(const std::string& s);

}  // namespace nibble::chat

#pragma once
// Reading required fields of tokenizer.json with errors that name the field and what was
// expected, e.g. "tokenizer.json: model.merges[3]: expected "a b" or ["a","b"], got 7".
#include <nlohmann/json.hpp>
#include <string>

#include "engine/tokenizer/tokenizer_error.h"

namespace nibble::tokenizer {

using Json = nlohmann::json;

inline std::string json_kind(const Json& j) {
  return j.type_name();
}

// Returns j[key], throwing if absent.
inline const Json& require_field(const Json& j, const char* key, const std::string& where) {
  if (!j.is_object()) throw TokenizerError(where + ": expected an object, got " + json_kind(j));
  auto it = j.find(key);
  if (it == j.end()) throw TokenizerError(where + "." + key + ": required field is missing");
  return *it;
}

inline std::string require_string(const Json& j, const char* key, const std::string& where) {
  const Json& v = require_field(j, key, where);
  if (!v.is_string())
    throw TokenizerError(where + "." + key + ": expected a string, got " + json_kind(v));
  return v.get<std::string>();
}

// An optional field of a given kind: `fallback` when absent or null.
inline bool optional_bool(const Json& j, const char* key, bool fallback, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    throw TokenizerError(where + "." + key + ": expected a boolean, got " + json_kind(*it));
  return it->get<bool>();
}

inline std::string optional_string(const Json& j, const char* key, const std::string& fallback,
                                   const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_string())
    throw TokenizerError(where + "." + key + ": expected a string, got " + json_kind(*it));
  return it->get<std::string>();
}

}  // namespace nibble::tokenizer

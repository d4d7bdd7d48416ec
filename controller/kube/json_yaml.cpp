#include "controller/kube/json_yaml.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace nibble::kube {
namespace {

// True when a plain scalar with this text would not read back as this string.
bool looks_like_another_type(const std::string& s) {
  if (s.empty()) return true;
  std::string lower = s;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  static const std::array<const char*, 13> kWords = {
      "y", "n", "yes", "no", "true", "false", "on", "off", "null", "~", ".inf", ".nan", "-.inf"};
  if (std::find_if(kWords.begin(), kWords.end(), [&](const char* w) { return lower == w; }) !=
      kWords.end())
    return true;
  // Anything that starts like a number (1, -2, +3, .5, 0x1F, 1e3, 1_000, 12:30) is quoted.
  std::size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i < s.size() && s[i] == '.') ++i;
  return i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]));
}

void emit(YAML::Emitter& out, const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::object:
      if (v.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      out << YAML::BeginMap;
      for (const auto& [key, value] : v.items()) {
        out << YAML::Key;
        emit(out, key);
        out << YAML::Value;
        emit(out, value);
      }
      out << YAML::EndMap;
      return;
    case nlohmann::json::value_t::array:
      if (v.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      out << YAML::BeginSeq;
      for (const auto& item : v) emit(out, item);
      out << YAML::EndSeq;
      return;
    case nlohmann::json::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      if (looks_like_another_type(s)) out << YAML::DoubleQuoted;
      out << s;
      return;
    }
    case nlohmann::json::value_t::boolean:
      out << v.get<bool>();
      return;
    case nlohmann::json::value_t::number_integer:
      out << v.get<std::int64_t>();
      return;
    case nlohmann::json::value_t::number_unsigned:
      out << v.get<std::uint64_t>();
      return;
    case nlohmann::json::value_t::number_float:
      out << v.get<double>();
      return;
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::binary:
    case nlohmann::json::value_t::discarded:
      out << YAML::Null;
      return;
  }
}

}  // namespace

std::string to_yaml(const nlohmann::json& value) {
  YAML::Emitter out;
  out.SetDoublePrecision(6);
  emit(out, value);
  return std::string(out.c_str()) + "\n";
}

}  // namespace nibble::kube

#include "engine/server/bounded_json.h"

#include <nlohmann/json.hpp>

#include "engine/server/api_error.h"
#include "engine/text/json_depth.h"

namespace nibble::server {

template <class Json>
Json parse_client_json(std::string_view text, int max_depth, const std::string& what,
                       const std::string& param) {
  Json parsed;
  try {
    parsed = text::parse_json_with_max_depth<Json>(text, max_depth);
  } catch (const text::JsonTooDeep&) {
    throw invalid_request(what + " nests more than " + std::to_string(max_depth) +
                              " levels of arrays and objects (the limit is " +
                              std::to_string(max_depth) + ")",
                          param);
  }
  if (parsed.is_discarded()) throw invalid_request(what + " is not valid JSON", param);
  return parsed;
}

template nlohmann::json parse_client_json<nlohmann::json>(std::string_view, int, const std::string&,
                                                          const std::string&);
template nlohmann::ordered_json parse_client_json<nlohmann::ordered_json>(std::string_view, int,
                                                                          const std::string&,
                                                                          const std::string&);

}  // namespace nibble::server

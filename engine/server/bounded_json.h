#pragma once
// JSON from clients, parsed with a nesting limit (engine/text/json_depth.h) and refused with a
// 400: a request body, and the JSON documents that travel inside one as strings (a guided_json
// schema, tool-call arguments).
#include <string>
#include <string_view>

#include "engine/text/json_depth.h"

namespace nibble::server {

using text::kDefaultMaxJsonDepth;  // arrays and objects inside one another: `[[1]]` is 2 deep

// Json is nlohmann::json or nlohmann::ordered_json. Throws ApiError 400 naming `param`:
// "<what> is not valid JSON", or "<what> nests more than N levels of arrays and objects (the
// limit is N)".
template <class Json>
Json parse_client_json(std::string_view text, int max_depth, const std::string& what,
                       const std::string& param = {});

}  // namespace nibble::server

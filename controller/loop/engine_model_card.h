#pragma once
// What an engine's own /v1/models says of its model (root, max_model_len), for the router's
// /v1/models to pass through: max_model_len is the engine's to know (its KV cache may lower the
// recipe's maxModelLen). Parsing is separate from fetching so it is tested on text.
#include <optional>
#include <string>

#include "controller/router/route_table.h"

namespace nibble::controller {

// The entry of the engine's /v1/models list whose id is `served_name` (the first one when no id
// matches); nullopt when the text is not such a list.
std::optional<router::ModelCard> parse_model_card(const std::string& models_json,
                                                  const std::string& served_name);

// GET http://host:port/v1/models with a short timeout (the engine's key as a bearer key);
// nullopt when it fails.
std::optional<router::ModelCard> fetch_model_card(const std::string& host, int port,
                                                  const std::string& api_key,
                                                  const std::string& served_name);

}  // namespace nibble::controller

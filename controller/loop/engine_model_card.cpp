#include "controller/loop/engine_model_card.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

namespace nibble::controller {

std::optional<router::ModelCard> parse_model_card(const std::string& models_json,
                                                  const std::string& served_name) {
  const nlohmann::json list = nlohmann::json::parse(models_json, nullptr, false);
  if (!list.is_object() || !list.contains("data") || !list["data"].is_array() ||
      list["data"].empty())
    return std::nullopt;
  const nlohmann::json* found = &list["data"].front();
  for (const nlohmann::json& m : list["data"])
    if (m.is_object() && m.value("id", "") == served_name) found = &m;
  if (!found->is_object()) return std::nullopt;
  router::ModelCard card;
  if (auto root = found->find("root"); root != found->end() && root->is_string())
    card.root = root->get<std::string>();
  if (auto len = found->find("max_model_len"); len != found->end() && len->is_number_integer())
    card.max_model_len = len->get<int>();
  return card;
}

std::optional<router::ModelCard> fetch_model_card(const std::string& host, int port,
                                                  const std::string& api_key,
                                                  const std::string& served_name) {
  httplib::Client client(host, port);
  client.set_connection_timeout(0, 300000);
  client.set_read_timeout(1, 0);
  httplib::Headers headers;
  if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
  auto res = client.Get("/v1/models", headers);
  if (!res || res->status != 200) return std::nullopt;
  return parse_model_card(res->body, served_name);
}

}  // namespace nibble::controller

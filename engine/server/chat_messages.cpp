#include "engine/server/chat_messages.h"

#include <string>

#include "engine/server/api_error.h"

namespace nibble::server {
namespace {

using nlohmann::json;

constexpr const char* kRoles[] = {"system", "developer", "user", "assistant", "tool", "function"};

bool known_role(const std::string& role) {
  for (const char* r : kRoles) {
    if (role == r) return true;
  }
  return false;
}

ApiError bad_message(const std::string& where, const std::string& message) {
  return invalid_request(where + message, "messages");
}

// The text of one content part; throws for parts a text-only model cannot take.
std::string part_text(const json& part, const std::string& where) {
  if (!part.is_object()) throw bad_message(where, " must be an object with a 'type'");
  auto type = part.find("type");
  if (type == part.end() || !type->is_string())
    throw bad_message(where, ".type must be a string such as \"text\"");
  const std::string kind = type->get<std::string>();
  if (kind == "text" || kind == "refusal") {
    auto text = part.find(kind);
    if (text == part.end() || !text->is_string())
      throw bad_message(where, "." + kind + " must be a string");
    return text->get<std::string>();
  }
  throw bad_message(where, ": content parts of type '" + kind +
                               "' are not supported: this model takes text only (send parts of "
                               "type 'text')");
}

}  // namespace

json normalize_chat_messages(const json& messages) {
  json out = json::array();
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad_message(where, " must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) throw bad_message(where, ".role must be a string");
    if (!known_role(role->get<std::string>())) {
      throw bad_message(where, ".role '" + role->get<std::string>() +
                                   "' is not a chat role (use system, developer, user, assistant, "
                                   "tool or function)");
    }
    json normalized = m;
    auto content = m.find("content");
    if (content != m.end() && content->is_array()) {
      std::string text;
      for (std::size_t j = 0; j < content->size(); ++j) {
        const std::string part =
            part_text((*content)[j], where + ".content[" + std::to_string(j) + "]");
        text += (j == 0 ? "" : "\n") + part;
      }
      normalized["content"] = text;
    } else if (content == m.end() || content->is_null()) {
      // As vLLM renders it: the official client sends an assistant's tool call back with
      // "content": null, and templates such as Qwen3's test `'</think>' in message.content`.
      normalized["content"] = "";
    } else if (!content->is_string()) {
      throw bad_message(where, ".content must be a string or an array of parts");
    }
    out.push_back(std::move(normalized));
  }
  return out;
}

json adapt_roles_to_template(json messages, std::string_view template_source) {
  auto names = [&](const std::string& role) {
    return template_source.find("'" + role + "'") != std::string_view::npos ||
           template_source.find("\"" + role + "\"") != std::string_view::npos;
  };
  const bool keep_developer = names("developer"), keep_function = names("function");
  const bool reads_thinking = template_source.find("message.thinking") != std::string_view::npos;
  for (json& m : messages) {
    const std::string role = m.value("role", "");
    if (role == "developer" && !keep_developer) m["role"] = "system";
    if (role == "function" && !keep_function) m["role"] = "tool";
    // Clients that send a previous answer back as it came ("tool_calls": null) mean no calls;
    // templates test `"tool_calls" in message` (gpt-oss's) and would index the null.
    if (const auto calls = m.find("tool_calls");
        calls != m.end() && (calls->is_null() || (calls->is_array() && calls->empty()))) {
      m.erase(calls);
    }
    if (reads_thinking && role == "assistant" && !m.contains("thinking")) {
      for (const char* key : {"reasoning_content", "reasoning"}) {
        if (m.contains(key) && m[key].is_string()) {
          m["thinking"] = m[key];
          break;
        }
      }
    }
  }
  return messages;
}

}  // namespace nibble::server

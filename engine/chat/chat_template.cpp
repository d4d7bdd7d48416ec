#include "engine/chat/chat_template.h"

#include <fstream>
#include <optional>
#include <sstream>

namespace nibble::chat {
namespace {

// transformers' SPECIAL_TOKENS_ATTRIBUTES that hold one token.
const char* const kSpecialTokenNames[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                          "pad_token", "cls_token", "mask_token"};

}  // namespace

ChatTemplateConfig parse_tokenizer_config(const nlohmann::json& config, const std::string& origin,
                                          const std::string* template_override) {
  if (!config.is_object()) throw TemplateError(origin + ": expected a JSON object", 0);
  ChatTemplateConfig out;
  const auto tmpl = config.find("chat_template");
  if (template_override) {
    out.chat_template = *template_override;
  } else if (tmpl == config.end() || tmpl->is_null()) {
    throw TemplateError(origin + ": no \"chat_template\" field; this model has no chat template",
                        0);
  } else if (tmpl->is_string()) {
    out.chat_template = tmpl->get<std::string>();
  } else if (tmpl->is_array()) {  // [{name, template}]: transformers uses "default" without tools
    for (const auto& entry : *tmpl) {
      if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
          !entry.contains("template") || !entry["template"].is_string())
        throw TemplateError(
            origin + ": chat_template list entries must be {\"name\": str, \"template\": str}", 0);
      if (entry["name"] == "default") out.chat_template = entry["template"].get<std::string>();
    }
    if (out.chat_template.empty())
      throw TemplateError(origin + ": chat_template list has no \"default\" entry", 0);
  } else {
    throw TemplateError(origin + ": \"chat_template\" must be a string or a list, got " +
                            std::string(tmpl->type_name()),
                        0);
  }
  for (const char* name : kSpecialTokenNames) {
    const auto tok = config.find(name);
    if (tok == config.end() || tok->is_null()) continue;
    if (tok->is_string()) {
      out.special_tokens.emplace_back(name, tok->get<std::string>());
    } else if (tok->is_object() && tok->contains("content") && (*tok)["content"].is_string()) {
      out.special_tokens.emplace_back(name, (*tok)["content"].get<std::string>());  // AddedToken
    } else {
      throw TemplateError(origin + ": \"" + name + "\" must be a string or an AddedToken object",
                          0);
    }
  }
  return out;
}

namespace {
std::optional<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}
}  // namespace

ChatTemplateConfig load_tokenizer_config(const std::filesystem::path& model_dir) {
  const auto path = model_dir / "tokenizer_config.json";
  const auto text = read_file(path);
  if (!text) throw TemplateError(path.string() + ": cannot open", 0);
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::parse_error& e) {
    throw TemplateError(path.string() + ": invalid JSON: " + e.what(), 0);
  }
  const auto jinja_file = read_file(model_dir / "chat_template.jinja");
  return parse_tokenizer_config(config, path.string(), jinja_file ? &*jinja_file : nullptr);
}

ChatRequest parse_chat_request(const nlohmann::ordered_json& body) {
  if (!body.is_object()) throw TemplateError("chat request: expected a JSON object", 0);
  ChatRequest req;
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& key = it.key();
    if (key == "messages") {
      if (!it->is_array()) throw TemplateError("chat request: \"messages\" must be an array", 0);
      for (const auto& m : *it)
        if (!m.is_object()) throw TemplateError("chat request: each message must be an object", 0);
      req.messages = *it;
    } else if (key == "add_generation_prompt") {
      if (!it->is_boolean())
        throw TemplateError("chat request: \"add_generation_prompt\" must be a boolean", 0);
      req.add_generation_prompt = it->get<bool>();
    } else if (key == "tools") {
      if (!it->is_array() && !it->is_null())
        throw TemplateError("chat request: \"tools\" must be an array", 0);
      req.tools = *it;
    } else if (key == "documents") {
      throw TemplateError("chat request: \"documents\" is not supported", 0);
    } else {
      req.extra[key] = *it;
    }
  }
  if (!body.contains("messages")) throw TemplateError("chat request: missing \"messages\"", 0);
  return req;
}

ChatTemplate::ChatTemplate(ChatTemplateConfig config)
    : config_(std::move(config)), compiled_(config_.chat_template) {}

std::string ChatTemplate::render(const ChatRequest& request) const {
  ValueDict vars;
  auto put = [&](const std::string& k, Value v) {
    for (auto& [key, val] : vars)
      if (key == k) {
        val = std::move(v);
        return;
      }
    vars.emplace_back(k, std::move(v));
  };
  put("messages", Value::from_json(request.messages));
  put("tools", request.tools.is_null() ? Value::none() : Value::from_json(request.tools));
  put("documents", Value::none());
  put("add_generation_prompt", Value::boolean(request.add_generation_prompt));
  for (const auto& [name, content] : config_.special_tokens) put(name, Value::string(content));
  for (auto it = request.extra.begin(); it != request.extra.end(); ++it)
    put(it.key(), Value::from_json(*it));
  return compiled_.render(vars);
}

}  // namespace nibble::chat

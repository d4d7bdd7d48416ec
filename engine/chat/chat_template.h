#pragma once
// Chat prompts as the model's own template renders them. Loads `chat_template` and the special
// tokens from a Hugging Face tokenizer_config.json and renders messages with the variables
// transformers' apply_chat_template passes: messages, tools (None when absent), documents
// (None), add_generation_prompt, the special tokens map (bos_token, eos_token, ... only those
// set) and the caller's extra kwargs (enable_thinking, ...), which win over special tokens.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "engine/chat/jinja_template.h"
#include "engine/chat/template_error.h"

namespace nibble::chat {

struct ChatTemplateConfig {
  std::string chat_template;                                        // the "default" one if named
  std::vector<std::pair<std::string, std::string>> special_tokens;  // name -> content
};

// Throws TemplateError (line 0) naming the file and field when the config is unusable:
// unreadable, not JSON, no chat_template, or a token that is neither a string nor AddedToken.
// template_override: the text of a chat_template.jinja file, used instead of the field.
ChatTemplateConfig parse_tokenizer_config(const nlohmann::json& config, const std::string& origin,
                                          const std::string* template_override = nullptr);
// model_dir/tokenizer_config.json; a model_dir/chat_template.jinja file (where newer Hugging Face
// repos keep the template) takes precedence over the "chat_template" field, as in transformers.
ChatTemplateConfig load_tokenizer_config(const std::filesystem::path& model_dir);

struct ChatRequest {
  // ordered_json: key order reaches the prompt through tojson, as in Python.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  bool add_generation_prompt = false;
  nlohmann::ordered_json tools = nullptr;                           // null: the template sees None
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more template variables
};

// Builds a ChatRequest from the CLI/API form {"messages": [...], "add_generation_prompt": b,
// "tools": [...], ...extra}. Throws TemplateError on a missing or mistyped field.
ChatRequest parse_chat_request(const nlohmann::ordered_json& body);

class ChatTemplate {
 public:
  explicit ChatTemplate(ChatTemplateConfig config);
  std::string render(const ChatRequest& request) const;
  // The template's text (tool-call format detection reads it).
  const std::string& source() const { return config_.chat_template; }

 private:
  ChatTemplateConfig config_;
  JinjaTemplate compiled_;
};

}  // namespace nibble::chat

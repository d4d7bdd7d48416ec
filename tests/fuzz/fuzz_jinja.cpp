// libFuzzer: the jinja interpreter. An input that starts with '{' is a chat request (JSON,
// parsed with the server's depth limit) rendered by fixed templates that walk every value the
// client sends: messages, tools and kwargs, through tojson, items(), loops and a recursive
// macro. Any other input is a template source, lexed and parsed only (templates come from the
// model's files; rendering one could loop as long as it asks). Only TemplateError (and the
// depth limit's JsonTooDeep) may come out.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/chat/chat_template.h"
#include "engine/chat/template_error.h"
#include "engine/text/json_depth.h"

namespace {

using namespace nibble;

const std::vector<chat::ChatTemplate>& templates() {
  static const std::vector<chat::ChatTemplate> compiled = [] {
    const char* sources[] = {
        // The byte-level fixture's ChatML (tests/server/fixtures/byte-model).
        "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
        "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt "
        "%}{{ '<|im_start|>assistant\\n' }}{% endif %}",
        // Tools and tool calls as Qwen- and Llama-style templates write them.
        "{%- macro show(v, depth) -%}{%- if v is mapping -%}{{ '{' }}{%- for k, x in v.items() "
        "-%}{{ k }}={{ show(x, depth + 1) }};{%- endfor -%}{{ '}' }}{%- elif v is iterable and v "
        "is not string -%}[{%- for x in v -%}{{ show(x, depth + 1) }},{%- endfor -%}]{%- else "
        "-%}{{ v | string | truncate(20) }}{%- endif -%}{%- endmacro -%}"
        "{%- if tools %}{% for t in tools %}{{ t | tojson }}\\n{{ show(t, 0) }}{% endfor %}{% "
        "endif -%}{%- for m in messages -%}{{ m.role | upper }}: {% if m.content is string %}{{ "
        "m.content | trim }}{% else %}{{ m.content | tojson(indent=2) }}{% endif %}{%- if "
        "m.tool_calls %}{% for c in m.tool_calls %}{{ c.function.name }}({{ "
        "c.function.arguments | tojson }}){% endfor %}{% endif %}\\n{%- endfor -%}{%- for k, v "
        "in extra_kwargs.items() if extra_kwargs is defined %}{{ k }}{{ v }}{% endfor -%}"
        "{{ enable_thinking | default(false) }}{{ show(messages, 0) }}",
    };
    std::vector<chat::ChatTemplate> out;
    for (const char* source : sources) out.emplace_back(chat::ChatTemplateConfig{source, {}});
    return out;
  }();
  return compiled;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (!text.starts_with('{')) {
    try {
      chat::JinjaTemplate parsed(text);
    } catch (const chat::TemplateError&) {
    }
    return 0;
  }
  nlohmann::ordered_json body;
  try {
    body =
        text::parse_json_with_max_depth<nlohmann::ordered_json>(text, text::kDefaultMaxJsonDepth);
  } catch (const text::JsonTooDeep&) {
    return 0;
  }
  if (body.is_discarded()) return 0;
  try {
    const chat::ChatRequest request = chat::parse_chat_request(body);
    for (const chat::ChatTemplate& t : templates()) (void)t.render(request);
  } catch (const chat::TemplateError&) {
  }
  return 0;
}

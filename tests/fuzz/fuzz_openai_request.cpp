// libFuzzer: the OpenAI request parser, as the engine's HTTP handlers run it on a body: the
// bounded JSON parse, the completions or chat fields (messages, tools, tool calls and their
// arguments, sampling parameters), and the structured-output fields down to their grammar.
// Only a 400 (ApiError) or a refused grammar (StructuredError) may come out; anything else
// would be an escaped exception (a 500) or a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/server/api_error.h"
#include "engine/server/bounded_json.h"
#include "engine/server/openai_request.h"
#include "engine/server/structured_output_request.h"
#include "engine/server/tool_request.h"
#include "engine/structured/output_spec.h"
#include "engine/structured/structured_error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace nibble;
  using namespace nibble::server;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const RequestLimits limits;
  try {
    const nlohmann::json body =
        parse_client_json<nlohmann::json>(text, limits.max_json_depth, "the request body");
    const bool chat = body.is_object() && body.contains("messages");
    if (chat) {
      ChatCompletionRequest parsed = parse_chat_request(body, limits);
      nlohmann::ordered_json messages = parsed.messages;
      parse_tool_call_arguments(messages, limits.max_json_depth);
    } else {
      (void)parse_completion_request(body, limits);
    }
    if (!has_structured_output_fields(body)) return 0;
    const auto ordered =
        parse_client_json<nlohmann::ordered_json>(text, limits.max_json_depth, "the request body");
    const auto request = parse_structured_output(ordered, chat, limits.max_json_depth);
    if (!request) return 0;
    structured::JsonGrammarOptions options;
    options.max_repeat = 50;
    options.max_elements = 100000;
    (void)structured::build_grammar(request->spec, options);
  } catch (const ApiError&) {
  } catch (const structured::StructuredError&) {
  }
  return 0;
}

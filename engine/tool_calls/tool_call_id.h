#pragma once
// Tool-call ids, as OpenAI shapes them ("call_" + 24 alphanumerics) and as Mistral's templates
// require them (9 alphanumerics). Drawn from a per-thread generator seeded by the OS.
#include <string>

namespace nibble::tool_calls {

std::string random_alphanumeric(int length);
inline std::string new_tool_call_id() {
  return "call_" + random_alphanumeric(24);
}

}  // namespace nibble::tool_calls

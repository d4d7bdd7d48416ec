#pragma once
// External programs that tests use as oracles (promtool, prometheus, node, python3).
// Missing tool: the test skips with a message, except under CI=true or
// NIBBLE_REQUIRE_TOOLS=1, where it fails, because CI installs every tool it needs.
#include <optional>
#include <string>

namespace nibble::testing {

std::optional<std::string> find_executable(const std::string& name);
bool tools_required();
// A free TCP port on 127.0.0.1 at the time of the call.
int pick_free_port();

}  // namespace nibble::testing

// Inside a TEST: binds `var` to the tool's path or skips/fails the test.
#define NIBBLE_REQUIRE_TOOL(var, name)                                                   \
  std::string var;                                                                       \
  if (auto found_##var = ::nibble::testing::find_executable(name)) {                     \
    var = *found_##var;                                                                  \
  } else if (::nibble::testing::tools_required()) {                                      \
    FAIL() << "required tool '" << name << "' is not on PATH (scripts/install-deps.sh)"; \
  } else {                                                                               \
    GTEST_SKIP() << "tool '" << name << "' is not on PATH; run scripts/install-deps.sh"; \
  }

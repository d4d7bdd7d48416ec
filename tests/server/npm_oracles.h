#pragma once
// The pinned npm oracles (tests/oracle/npm): installed on first use; a test skips without them
// on a developer machine and fails under CI=true.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/child_process.h"
#include "tests/support/external_tool.h"

#define NIBBLE_REQUIRE_NPM_ORACLES()                                                             \
  {                                                                                              \
    const auto install = nibble::testing::run_command("bash " + std::string(NIBBLE_SOURCE_DIR) + \
                                                      "/tests/oracle/npm/install.sh");           \
    if (install.exit_code == 3 && !nibble::testing::tools_required())                            \
      GTEST_SKIP() << install.output;                                                            \
    ASSERT_EQ(install.exit_code, 0) << install.output;                                           \
  }

namespace nibble::server::testing {

// Runs tests/oracle/openai/<script> against the server on `port`; it must pass every check.
inline void expect_node_check(const std::string& node, const std::string& script, int port,
                              const nlohmann::json& expect) {
  auto result = nibble::testing::run_command(
      node + " " + std::string(NIBBLE_SOURCE_DIR) + "/tests/oracle/openai/" + script +
      " http://127.0.0.1:" + std::to_string(port) + "/v1 byte-model '" + expect.dump() + "'");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("0 failed"), std::string::npos) << result.output;
}

}  // namespace nibble::server::testing

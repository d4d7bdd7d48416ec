// Oracle: Prometheus' own linter must accept everything the library renders.
#include <gtest/gtest.h>

#include <fstream>

#include "metrics/registry.h"
#include "tests/metrics/sample_registry.h"
#include "tests/support/child_process.h"
#include "tests/support/external_tool.h"
#include "tests/support/temp_dir.h"

namespace nibble::metrics {
namespace {

TEST(Promtool, CheckMetricsIsClean) {
  NIBBLE_REQUIRE_TOOL(promtool, "promtool");
  Registry registry;
  testing::fill_sample_registry(registry);
  nibble::testing::TempDir dir;
  const auto file = dir.path() / "metrics.txt";
  std::ofstream(file) << registry.render();

  auto result = nibble::testing::run_command(promtool + " check metrics < " + file.string());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "") << "promtool complained:\n" << result.output;
}

TEST(Promtool, CatchesABrokenExposition) {
  // Proves the check above can fail: promtool must reject a counter without _total
  // and a malformed line.
  NIBBLE_REQUIRE_TOOL(promtool, "promtool");
  nibble::testing::TempDir dir;
  const auto file = dir.path() / "bad.txt";
  std::ofstream(file) << "# HELP bad_counter x\n# TYPE bad_counter counter\nbad_counter 1\n";
  auto result = nibble::testing::run_command(promtool + " check metrics < " + file.string());
  EXPECT_NE(result.output, "");
}

}  // namespace
}  // namespace nibble::metrics

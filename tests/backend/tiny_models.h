#pragma once
// The random-weight checkpoints an architecture's CPU backend tests share: nibble-make-model's
// tiny preset with a fixed seed and no tokenizer, one directory per dtype (dir/<dtype>), made
// once per test suite (NIBBLE_MAKE_MODEL names the tool).
#include <gtest/gtest.h>

#include <filesystem>
#include <initializer_list>
#include <string>

#include "tests/support/child_process.h"

namespace nibble::testing {

inline void make_tiny_models(const std::filesystem::path& dir, const std::string& arch, int seed,
                             std::initializer_list<const char*> dtypes) {
  for (const char* dtype : dtypes) {
    const std::string cmd = std::string(NIBBLE_MAKE_MODEL) + " --arch " + arch +
                            " --preset tiny --seed " + std::to_string(seed) +
                            " --threads 2 --no-tokenizer --dtype " + dtype + " --output " +
                            (dir / dtype).string();
    const auto made = run_command(cmd);
    ASSERT_EQ(made.exit_code, 0) << cmd << "\n" << made.output;
  }
}

}  // namespace nibble::testing

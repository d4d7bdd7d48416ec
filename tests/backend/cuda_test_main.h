#pragma once
// The main of the CUDA backend's GPU test binaries: exits 77 (ctest's "skipped") where no usable
// GPU is present, takes the random seed from NIBBLE_TEST_SEED when it is set (else
// `default_seed`), prints it so a failing run can be repeated, and runs every test.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/backend/cuda/cuda_backend.h"

namespace nibble::backend::testing {

inline int run_cuda_tests(int argc, char** argv, std::uint64_t& seed, std::uint64_t default_seed) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string why;
  if (!cuda_device_available(&why)) {
    std::printf("skipped: %s\n", why.c_str());
    return 77;
  }
  const char* fixed = std::getenv("NIBBLE_TEST_SEED");
  seed = fixed ? std::strtoull(fixed, nullptr, 10) : default_seed;
  std::printf("seed %llu (NIBBLE_TEST_SEED=%llu reruns it)\n", (unsigned long long)seed,
              (unsigned long long)seed);
  return RUN_ALL_TESTS();
}

}  // namespace nibble::backend::testing

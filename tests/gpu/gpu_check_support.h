#pragma once
// Small harness for the GPU tests: a plain main (the device image has no GoogleTest), CUDA
// calls checked one by one, results counted. Exit codes: 0 pass, 1 fail, 77 skipped (no GPU).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace nibble::gpu_test {

inline constexpr int kSkipExitCode = 77;

struct CudaFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check_cuda(cudaError_t err, const char* what, const char* file, int line) {
  if (err != cudaSuccess) {
    throw CudaFailure(std::string(file) + ":" + std::to_string(line) + ": " + what + " -> " +
                      cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  }
}

// Why there is no usable GPU, or "" when there is one.
inline std::string no_gpu_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
  if (count == 0) return "no CUDA device";
  return "";
}

class Results {
 public:
  void record(bool ok, const std::string& name, const std::string& detail) {
    std::printf("%s %s %s\n", ok ? "PASS" : "FAIL", name.c_str(), detail.c_str());
    std::fflush(stdout);
    (ok ? passed_ : failed_)++;
  }
  int exit_code() const {
    std::printf("%d passed, %d failed\n", passed_, failed_);
    return failed_ == 0 && passed_ > 0 ? 0 : 1;
  }

 private:
  int passed_ = 0, failed_ = 0;
};

// The body of a GPU test's main(): run(argc, argv)'s exit code, or a failure with the message of
// what it threw.
template <class Run>
int run_reporting_failures(Run run, int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}

// The run's random seed: NIBBLE_TEST_SEED when set (to rerun a failure), else the clock; printed.
inline std::uint64_t test_seed() {
  const char* fixed = std::getenv("NIBBLE_TEST_SEED");
  const std::uint64_t seed =
      fixed ? std::strtoull(fixed, nullptr, 10)
            : std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  std::printf("seed %llu (NIBBLE_TEST_SEED=%llu reruns it)\n", (unsigned long long)seed,
              (unsigned long long)seed);
  return seed;
}

// A device array of n elements (at least one), freed with its owner.
template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  std::size_t n = 0;
  explicit DeviceArray(std::size_t count) : n(std::max<std::size_t>(count, 1)) {
    check_cuda(cudaMalloc(&ptr, n * sizeof(T)), "cudaMalloc", __FILE__, __LINE__);
  }
  ~DeviceArray() { (void)cudaFree(ptr); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void upload(const std::vector<T>& host) {
    if (!host.empty())
      check_cuda(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
                 "cudaMemcpy", __FILE__, __LINE__);
  }
  std::vector<T> download(std::size_t count) const {
    std::vector<T> host(count);
    if (count > 0)
      check_cuda(cudaMemcpy(host.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost),
                 "cudaMemcpy", __FILE__, __LINE__);
    return host;
  }
  std::vector<T> download() const { return download(n); }
};

}  // namespace nibble::gpu_test

#define NIBBLE_CUDA_CHECK(expr) ::nibble::gpu_test::check_cuda((expr), #expr, __FILE__, __LINE__)

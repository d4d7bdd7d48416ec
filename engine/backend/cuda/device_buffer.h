#pragma once
// Owning device (or pinned host) allocations. ensure(n) grows a buffer to at least n elements,
// dropping its contents; it is how the per-step activation buffers follow the batch size.
#include <cuda_runtime.h>

#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "engine/backend/cuda/cuda_error.h"

namespace nibble::backend::cuda {

template <typename T, bool kPinnedHost = false>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t n) { ensure(n); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~Buffer() { release(); }

  void ensure(std::size_t n) {
    if (n <= size_) return;
    release();
    void* p = nullptr;
    const std::size_t bytes = n * sizeof(T);
    const cudaError_t err = kPinnedHost ? cudaMallocHost(&p, bytes) : cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // an allocation failure is not sticky: clear it
      throw BackendError("cuda backend: cannot allocate " + std::to_string(bytes >> 20) +
                         " MiB of " + (kPinnedHost ? "pinned host" : "device") +
                         " memory: " + cudaGetErrorString(err));
    }
    ptr_ = static_cast<T*>(p);
    size_ = n;
  }
  // A device buffer holding exactly `host`'s elements.
  static Buffer from(std::span<const T> host) {
    Buffer b(host.size());
    if (!host.empty())
      check(cudaMemcpy(b.ptr_, host.data(), host.size_bytes(), cudaMemcpyHostToDevice),
            "copying weights to the device");
    return b;
  }

  T* get() const { return ptr_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  void release() {
    if (ptr_ != nullptr) kPinnedHost ? (void)cudaFreeHost(ptr_) : (void)cudaFree(ptr_);
    ptr_ = nullptr;
    size_ = 0;
  }
  T* ptr_ = nullptr;
  std::size_t size_ = 0;
};

template <typename T>
using DeviceBuffer = Buffer<T, false>;
template <typename T>
using PinnedBuffer = Buffer<T, true>;

}  // namespace nibble::backend::cuda

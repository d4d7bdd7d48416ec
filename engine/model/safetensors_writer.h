#pragma once
// Writing safetensors files: the header first, then every tensor's bytes filled in place
// (the file is mmap'd for writing) by a pool of threads, so multi-GB models write quickly.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "engine/model/dtype.h"

namespace nibble::model {

struct TensorSpec {
  std::string name;
  DType dtype = DType::BF16;
  std::vector<std::int64_t> shape;
  std::size_t byte_size() const;
};

// Called once per tensor (index into specs) with that tensor's zeroed bytes to fill.
using TensorFiller = std::function<void(std::size_t index, std::span<std::byte> out)>;

// Throws ModelError on I/O failure or duplicate names. threads >= 1.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorSpec>& specs,
                       const std::map<std::string, std::string>& metadata,
                       const TensorFiller& fill, int threads);

}  // namespace nibble::model

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
                       const std::map<std::string, std::string>& metadata, const TensorFiller& fill,
                       int threads);

// Several tensors computed together (an NVFP4 weight and its scales come from one matrix).
struct WeightJob {
  std::vector<TensorSpec> tensors;
  // Fills one zeroed span per tensor, in the order of `tensors`.
  std::function<void(std::vector<std::span<std::byte>>& out)> fill;
  std::size_t byte_size() const;
};

// Writes a Hugging Face model directory's weights: model.safetensors when everything fits in
// max_shard_bytes, else model-0000i-of-0000n.safetensors plus model.safetensors.index.json.
// A job's tensors always land in the same shard. Progress is logged as shards complete.
void write_checkpoint(const std::filesystem::path& dir, const std::vector<WeightJob>& jobs,
                      std::size_t max_shard_bytes, int threads);

}  // namespace nibble::model

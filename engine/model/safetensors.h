#pragma once
// Reading safetensors checkpoints: one file (mmap'd, header validated) or a sharded directory
// (model.safetensors.index.json). A file that opens is safe to read: every tensor's byte range
// lies inside the file, matches shape x dtype size, and overlaps no other tensor.
// Every failure is a ModelError naming the file (and the tensor when there is one).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/model/dtype.h"
#include "engine/model/model_error.h"

namespace nibble::model {

// Largest header we accept; real checkpoints have a few MB at most.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

struct TensorView {
  std::string name;
  DType dtype = DType::U8;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> bytes;  // points into the mapped file; valid while the file lives
  std::string file;                  // for error messages

  std::int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Maps and validates the file; throws ModelError.
  static std::unique_ptr<SafetensorsFile> open(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorView* find(const std::string& name) const;

 private:
  SafetensorsFile() = default;
  std::filesystem::path path_;
  void* map_ = nullptr;
  std::size_t map_size_ = 0;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a model directory: model.safetensors.index.json (sharded) if present,
// otherwise model.safetensors. Tensor names must be unique across shards.
class Checkpoint {
 public:
  static Checkpoint open(const std::filesystem::path& dir);

  const TensorView* find(const std::string& name) const;
  // The tensor or a ModelError "missing tensor NAME in DIR".
  const TensorView& require(const std::string& name) const;
  bool has(const std::string& name) const { return find(name) != nullptr; }
  std::vector<std::string> names() const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
};

}  // namespace nibble::model

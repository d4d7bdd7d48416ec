#include "engine/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/text/json_depth.h"

namespace nibble::model {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& what) {
  throw ModelError(file.string() + ": " + what);
}

[[noreturn]] void fail_tensor(const std::filesystem::path& file, const std::string& tensor,
                              const std::string& what) {
  throw ModelError(file.string() + ": tensor '" + tensor + "': " + what);
}

// A header nests three levels (names, an entry, its shape); anything much deeper is not one.
constexpr int kHeaderMaxDepth = 8;

// Parses the header JSON; rejects duplicate top-level names, which nlohmann would silently merge.
json parse_header(const std::filesystem::path& file, std::string_view text) {
  std::set<std::string> seen;
  std::string duplicate;
  json header;
  try {
    header =
        text::parse_json_with_max_depth<json>(text, kHeaderMaxDepth, [&](const std::string& key) {
          if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
        });
  } catch (const text::JsonTooDeep&) {
    fail(file, "header nests deeper than " + std::to_string(kHeaderMaxDepth) + " levels");
  }
  if (header.is_discarded()) fail(file, "header is not valid JSON");
  if (!duplicate.empty()) fail_tensor(file, duplicate, "appears twice in the header");
  if (!header.is_object()) fail(file, "header must be a JSON object");
  return header;
}

TensorView parse_entry(const std::filesystem::path& file, const std::string& name,
                       const json& entry, std::span<const std::byte> data,
                       std::pair<std::uint64_t, std::uint64_t>& range) {
  if (!entry.is_object()) fail_tensor(file, name, "entry must be an object");
  auto dtype_it = entry.find("dtype");
  auto shape_it = entry.find("shape");
  auto offsets_it = entry.find("data_offsets");
  if (dtype_it == entry.end() || !dtype_it->is_string())
    fail_tensor(file, name, "missing string field 'dtype'");
  if (shape_it == entry.end() || !shape_it->is_array())
    fail_tensor(file, name, "missing array field 'shape'");
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2)
    fail_tensor(file, name, "'data_offsets' must be an array [begin, end]");

  TensorView view;
  view.name = name;
  view.file = file.string();
  auto dtype = parse_dtype(dtype_it->get<std::string>());
  if (!dtype) fail_tensor(file, name, "unknown dtype '" + dtype_it->get<std::string>() + "'");
  view.dtype = *dtype;

  // numel * size must not overflow; 2^62 bytes is far beyond any file.
  constexpr std::uint64_t kLimit = std::uint64_t(1) << 62;
  std::uint64_t bytes = dtype_size(view.dtype);
  for (const auto& dim : *shape_it) {
    if (!dim.is_number_unsigned())
      fail_tensor(file, name, "shape entries must be non-negative integers, got " + dim.dump());
    auto d = dim.get<std::uint64_t>();
    if (d != 0 && bytes > kLimit / d) fail_tensor(file, name, "shape is impossibly large");
    bytes *= d;
    view.shape.push_back(std::int64_t(d));
  }
  for (const auto& off : *offsets_it)
    if (!off.is_number_unsigned())
      fail_tensor(file, name, "data_offsets must be non-negative integers, got " + off.dump());
  auto begin = (*offsets_it)[0].get<std::uint64_t>();
  auto end = (*offsets_it)[1].get<std::uint64_t>();
  if (begin > end) fail_tensor(file, name, "data_offsets begin > end");
  if (end > data.size())
    fail_tensor(file, name,
                "data_offsets end " + std::to_string(end) + " is past the data section (" +
                    std::to_string(data.size()) + " bytes); truncated file?");
  if (end - begin != bytes)
    fail_tensor(file, name,
                "byte range is " + std::to_string(end - begin) + " bytes but shape x " +
                    std::string(dtype_name(view.dtype)) + " needs " + std::to_string(bytes));
  view.bytes = data.subspan(begin, end - begin);
  range = {begin, end};
  return view;
}

}  // namespace

std::int64_t TensorView::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  auto size = std::size_t(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail(path, "file is " + std::to_string(size) + " bytes, too short for a safetensors header");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) fail(path, std::string("mmap failed: ") + std::strerror(errno));
  f->map_ = map;
  f->map_size_ = size;

  const auto* base = static_cast<const std::byte*>(map);
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | std::uint64_t(base[i]);
  if (header_len > kMaxSafetensorsHeaderBytes)
    fail(path, "header length " + std::to_string(header_len) + " exceeds the limit of " +
                   std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
  if (header_len > size - 8)
    fail(path, "header length " + std::to_string(header_len) + " is past the end of the file (" +
                   std::to_string(size) + " bytes)");
  std::string_view text(reinterpret_cast<const char*>(base + 8), header_len);
  json header = parse_header(path, text);
  std::span<const std::byte> data(base + 8 + header_len, size - 8 - header_len);

  std::vector<std::pair<std::pair<std::uint64_t, std::uint64_t>, std::string>> ranges;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(path, "__metadata__ must be an object of strings");
      for (auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail(path, "__metadata__ field '" + k + "' must be a string");
        f->metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    std::pair<std::uint64_t, std::uint64_t> range;
    f->tensors_.emplace(name, parse_entry(path, name, entry, data, range));
    ranges.push_back({range, name});
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    const auto& prev = ranges[i - 1];
    const auto& cur = ranges[i];
    bool empty = cur.first.first == cur.first.second || prev.first.first == prev.first.second;
    if (!empty && cur.first.first < prev.first.second)
      fail_tensor(path, cur.second, "byte range overlaps tensor '" + prev.second + "'");
  }
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_size_);
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Checkpoint Checkpoint::open(const std::filesystem::path& dir) {
  Checkpoint ck;
  ck.dir_ = dir;
  auto index_path = dir / "model.safetensors.index.json";
  auto single_path = dir / "model.safetensors";
  if (std::filesystem::exists(index_path)) {
    std::ifstream in(index_path);
    json index = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (index.is_discarded() || !index.is_object()) fail(index_path, "not a valid JSON object");
    auto map_it = index.find("weight_map");
    if (map_it == index.end() || !map_it->is_object())
      fail(index_path, "missing object 'weight_map'");
    std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
    for (auto& [name, shard] : map_it->items()) {
      if (!shard.is_string()) fail(index_path, "weight_map['" + name + "'] must be a file name");
      auto shard_name = shard.get<std::string>();
      if (shard_name.find('/') != std::string::npos || shard_name.starts_with("."))
        fail(index_path,
             "weight_map['" + name + "'] names a file outside the model directory: " + shard_name);
      auto& file = shards[shard_name];
      if (!file) {
        file = SafetensorsFile::open(dir / shard_name);
        ck.files_.push_back(file);
      }
      const TensorView* view = file->find(name);
      if (!view)
        fail(index_path, "tensor '" + name + "' is listed in " + shard_name + " but not in it");
      ck.index_[name] = view;
    }
    for (const auto& file : ck.files_)
      for (const auto& [name, view] : file->tensors())
        if (!ck.index_.count(name))
          fail_tensor(file->path(), name, "is not listed in model.safetensors.index.json");
  } else if (std::filesystem::exists(single_path)) {
    auto file = std::shared_ptr<SafetensorsFile>(SafetensorsFile::open(single_path));
    ck.files_.push_back(file);
    for (const auto& [name, view] : file->tensors()) ck.index_[name] = &view;
  } else {
    throw ModelError(dir.string() +
                     ": no model.safetensors or model.safetensors.index.json in this directory");
  }
  return ck;
}

const TensorView* Checkpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const TensorView& Checkpoint::require(const std::string& name) const {
  if (const auto* v = find(name)) return *v;
  throw ModelError(dir_.string() + ": missing tensor '" + name + "'");
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, view] : index_) out.push_back(name);
  return out;
}

}  // namespace nibble::model

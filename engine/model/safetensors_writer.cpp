#include "engine/model/safetensors_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "engine/model/model_error.h"

namespace nibble::model {

std::size_t TensorSpec::byte_size() const {
  std::size_t n = dtype_size(dtype);
  for (auto d : shape) n *= std::size_t(d);
  return n;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorSpec>& specs,
                       const std::map<std::string, std::string>& metadata,
                       const TensorFiller& fill, int threads) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  std::vector<std::size_t> offsets;
  std::size_t offset = 0;
  for (const auto& s : specs) {
    if (!names.insert(s.name).second)
      throw ModelError(path.string() + ": tensor '" + s.name + "' written twice");
    offsets.push_back(offset);
    header[s.name] = {{"dtype", dtype_name(s.dtype)},
                      {"shape", s.shape},
                      {"data_offsets", {offset, offset + s.byte_size()}}};
    offset += s.byte_size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned
  const std::size_t data_start = 8 + text.size();
  const std::size_t total = data_start + offset;

  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw ModelError(path.string() + ": cannot create: " + std::strerror(errno));
  if (::ftruncate(fd, off_t(total)) != 0) {
    ::close(fd);
    throw ModelError(path.string() + ": cannot size to " + std::to_string(total) + " bytes");
  }
  void* map = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) throw ModelError(path.string() + ": mmap for writing failed");
  auto* base = static_cast<std::byte*>(map);
  std::uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) base[i] = std::byte((len >> (8 * i)) & 0xff);
  std::memcpy(base + 8, text.data(), text.size());

  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < specs.size();) {
      try {
        fill(i, {base + data_start + offsets[i], specs[i].byte_size()});
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  ::munmap(map, total);
  if (error) std::rethrow_exception(error);
}

}  // namespace nibble::model

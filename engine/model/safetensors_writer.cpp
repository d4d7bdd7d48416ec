#include "engine/model/safetensors_writer.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "engine/model/model_error.h"

namespace nibble::model {
namespace {

// Lays out one file holding every tensor of `jobs`, maps it, and runs the jobs on `threads`
// threads, each filling its tensors in place.
void write_jobs(const std::filesystem::path& path, const std::vector<const WeightJob*>& jobs,
                const std::map<std::string, std::string>& metadata, int threads,
                const std::function<void(std::size_t)>& on_job_done) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  std::vector<std::vector<std::size_t>> offsets(jobs.size());
  std::size_t offset = 0;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    for (const auto& s : jobs[j]->tensors) {
      if (!names.insert(s.name).second)
        throw ModelError(path.string() + ": tensor '" + s.name + "' written twice");
      offsets[j].push_back(offset);
      header[s.name] = {{"dtype", dtype_name(s.dtype)},
                        {"shape", s.shape},
                        {"data_offsets", {offset, offset + s.byte_size()}}};
      offset += s.byte_size();
    }
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
    for (std::size_t j; (j = next.fetch_add(1)) < jobs.size();) {
      try {
        std::vector<std::span<std::byte>> spans;
        for (std::size_t t = 0; t < jobs[j]->tensors.size(); ++t)
          spans.emplace_back(base + data_start + offsets[j][t], jobs[j]->tensors[t].byte_size());
        jobs[j]->fill(spans);
        if (on_job_done) on_job_done(j);
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

}  // namespace

std::size_t TensorSpec::byte_size() const {
  std::size_t n = dtype_size(dtype);
  for (auto d : shape) n *= std::size_t(d);
  return n;
}

std::size_t WeightJob::byte_size() const {
  std::size_t n = 0;
  for (const auto& t : tensors) n += t.byte_size();
  return n;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorSpec>& specs,
                       const std::map<std::string, std::string>& metadata, const TensorFiller& fill,
                       int threads) {
  std::vector<WeightJob> jobs;
  for (std::size_t i = 0; i < specs.size(); ++i)
    jobs.push_back(
        {{specs[i]}, [&fill, i](std::vector<std::span<std::byte>>& out) { fill(i, out[0]); }});
  std::vector<const WeightJob*> ptrs;
  for (const auto& j : jobs) ptrs.push_back(&j);
  write_jobs(path, ptrs, metadata, threads, nullptr);
}

void write_checkpoint(const std::filesystem::path& dir, const std::vector<WeightJob>& jobs,
                      std::size_t max_shard_bytes, int threads) {
  // Greedy shard assignment in job order.
  std::vector<std::vector<const WeightJob*>> shards(1);
  std::size_t bytes = 0, total = 0;
  for (const auto& job : jobs) {
    const std::size_t size = job.byte_size();
    if (bytes > 0 && bytes + size > max_shard_bytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(&job);
    bytes += size;
    total += size;
  }
  std::filesystem::create_directories(dir);
  const bool sharded = shards.size() > 1;
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  std::atomic<std::size_t> done_jobs{0};
  std::atomic<std::size_t> done_bytes{0};
  std::mutex log_mutex;
  std::size_t next_report = 0;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    const std::string file = sharded ? name : "model.safetensors";
    for (const auto* job : shards[s])
      for (const auto& t : job->tensors) weight_map[t.name] = file;
    const auto& shard = shards[s];
    write_jobs(dir / file, shard, {{"format", "pt"}}, threads, [&](std::size_t j) {
      ++done_jobs;
      std::size_t b = done_bytes += shard[j]->byte_size();
      std::lock_guard lock(log_mutex);
      if (b * 20 >= next_report * total) {  // about every 5%
        spdlog::info("wrote {}/{} weights ({:.1f} of {:.1f} MB)", done_jobs.load(), jobs.size(),
                     double(b) / 1e6, double(total) / 1e6);
        next_report = b * 20 / std::max<std::size_t>(total, 1) + 1;
      }
    });
  }
  if (sharded) {
    nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}},
                                    {"weight_map", weight_map}};
    std::ofstream out(dir / "model.safetensors.index.json");
    out << index.dump(2) << "\n";
    if (!out) throw ModelError((dir / "model.safetensors.index.json").string() + ": write failed");
  } else {
    std::filesystem::remove(dir / "model.safetensors.index.json");
  }
}

}  // namespace nibble::model

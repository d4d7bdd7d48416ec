// A CUDA injection library (CUDA_INJECTION64_PATH=libnibble-kernel-trace.so) that records the GPU
// start and end of every kernel, graph replays included, through CUPTI's activity API and writes
// them as CSV at exit to NIBBLE_TRACE_OUT (default kernel-trace.csv):
//   start_ns,end_ns,graph_id,name
// Timestamps are the GPU's, so kernels under programmatic dependent launch show their real
// overlap: what Nsight Compute's serialised replay hides. tools/kernel-trace/summarize.py turns a
// trace into the per-step critical path.
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Record {
  unsigned long long start, end;
  unsigned graph;
  std::string name;
};

std::mutex records_mutex;
std::vector<Record> records;
constexpr std::size_t kBufferBytes = 8u << 20;

void report(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  std::fprintf(stderr, "nibble-kernel-trace: %s: %s\n", what, text != nullptr ? text : "?");
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t,
                               std::size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(records_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    records.push_back({k->start, k->end, k->graphId, k->name != nullptr ? k->name : "?"});
  }
  std::size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  if (dropped > 0) std::fprintf(stderr, "nibble-kernel-trace: %zu records dropped\n", dropped);
  std::free(buffer);
}

void write_out() {
  report(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flushing");
  const char* path = std::getenv("NIBBLE_TRACE_OUT");
  if (path == nullptr || *path == '\0') path = "kernel-trace.csv";
  std::FILE* f = std::fopen(path, "w");
  if (f == nullptr) {
    std::fprintf(stderr, "nibble-kernel-trace: cannot write %s\n", path);
    return;
  }
  std::lock_guard<std::mutex> lock(records_mutex);
  std::fprintf(f, "start_ns,end_ns,graph_id,name\n");
  for (const Record& r : records) {
    std::string name = r.name;  // a mangled name has no comma, a demangled one might
    for (char& c : name)
      if (c == ',') c = ';';
    std::fprintf(f, "%llu,%llu,%u,%s\n", r.start, r.end, r.graph, name.c_str());
  }
  std::fclose(f);
  std::fprintf(stderr, "nibble-kernel-trace: %zu kernels to %s\n", records.size(), path);
}

}  // namespace

// Called by the CUDA driver when it loads the library (CUDA_INJECTION64_PATH), before any work.
extern "C" int InitializeInjection() {
  report(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "callbacks");
  report(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enabling kernel records");
  std::atexit(write_out);
  return 1;
}

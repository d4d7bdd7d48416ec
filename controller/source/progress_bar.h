// controller/source/progress_bar.h: the download progress a ModelDownloader reports, and a
// plain terminal progress bar that renders it on one line (\r-redrawn, no curses).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace nibble::source {

struct DownloadProgress {
  std::string file;            // repo-relative path being transferred
  uint64_t file_done = 0;      // bytes of this file on disk (resumed bytes included)
  uint64_t file_total = 0;     // its size, 0 while unknown
  uint64_t overall_done = 0;   // bytes of all needed files on disk
  uint64_t overall_total = 0;  // sum of the sizes the file list reported (0 if it had none)
  int files_done = 0;
  int files_total = 0;
};

// "[=====>    ]  52% 1.2 GiB/2.3 GiB  3/7 model-00001.safetensors", width columns of bar.
std::string format_progress_line(const DownloadProgress& progress, int width = 30);
std::string format_bytes(uint64_t bytes);

// Redraws format_progress_line on `out` at most every min_interval_ms, always for a file's
// last chunk; call finish() once to end the line.
class TerminalProgressBar {
 public:
  explicit TerminalProgressBar(std::FILE* out = stderr, int min_interval_ms = 100);
  void update(const DownloadProgress& progress);
  void finish();

 private:
  std::FILE* out_;
  int min_interval_ms_;
  int64_t last_draw_ms_ = -1;
  bool drew_ = false;
};

}  // namespace nibble::source

#include "controller/source/progress_bar.h"

#include <algorithm>
#include <chrono>

namespace nibble::source {

std::string format_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, unit == 0 ? "%.0f %s" : "%.1f %s", value, kUnits[unit]);
  return buffer;
}

std::string format_progress_line(const DownloadProgress& p, int width) {
  // Overall bytes when the file list gave sizes, else this file's bytes.
  const uint64_t done = p.overall_total ? p.overall_done : p.file_done;
  const uint64_t total = p.overall_total ? p.overall_total : p.file_total;
  const double fraction =
      total ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 0.0;
  const int filled = static_cast<int>(fraction * width);
  std::string line = "[";
  for (int i = 0; i < width; ++i) line += i < filled ? '=' : (i == filled ? '>' : ' ');
  char percent[16];
  std::snprintf(percent, sizeof percent, "] %3d%% ", static_cast<int>(fraction * 100.0));
  line += percent;
  line += format_bytes(done) + "/" + (total ? format_bytes(total) : std::string("?"));
  line += "  " + std::to_string(p.files_done) + "/" + std::to_string(p.files_total) + " " + p.file;
  return line;
}

TerminalProgressBar::TerminalProgressBar(std::FILE* out, int min_interval_ms)
    : out_(out), min_interval_ms_(min_interval_ms) {}

void TerminalProgressBar::update(const DownloadProgress& progress) {
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  const bool file_finished = progress.file_total && progress.file_done == progress.file_total;
  if (!file_finished && last_draw_ms_ >= 0 && now_ms - last_draw_ms_ < min_interval_ms_) return;
  last_draw_ms_ = now_ms;
  std::fprintf(out_, "\r%s\033[K", format_progress_line(progress).c_str());
  std::fflush(out_);
  drew_ = true;
}

void TerminalProgressBar::finish() {
  if (drew_) std::fputc('\n', out_);
  drew_ = false;
}

}  // namespace nibble::source

#include "controller/local/log_tail.h"

#include <algorithm>
#include <fstream>
#include <string_view>
#include <vector>

namespace nibble::local {

std::string tail_lines(const std::filesystem::path& file, int lines, std::uintmax_t* end) {
  constexpr std::streamoff kWindow = 1 << 20;
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in || lines <= 0) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > kWindow ? size - kWindow : 0;
  in.seekg(start);
  std::string text(static_cast<std::size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (end != nullptr) *end = static_cast<std::uintmax_t>(start) + text.size();

  std::vector<std::string_view> all;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t nl = text.find('\n', at);
    const std::size_t end = nl == std::string::npos ? text.size() : nl;
    all.emplace_back(text.data() + at, end - at);
    at = end + 1;
  }
  if (start > 0 && !all.empty()) all.erase(all.begin());  // cut by the window: partial
  std::string out;
  const std::size_t first = all.size() > std::size_t(lines) ? all.size() - lines : 0;
  for (std::size_t i = first; i < all.size(); ++i) out.append(all[i]).push_back('\n');
  return out;
}

std::string lines_since(const std::filesystem::path& file, std::uintmax_t& offset) {
  constexpr std::uintmax_t kMaxRead = 1 << 20;
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const auto size = static_cast<std::uintmax_t>(std::streamoff(in.tellg()));
  if (size < offset) offset = 0;
  if (size == offset) return "";
  in.seekg(static_cast<std::streamoff>(offset));
  std::string text(static_cast<std::size_t>(std::min(size - offset, kMaxRead)), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  const std::size_t last_newline = text.rfind('\n');
  if (last_newline == std::string::npos) {
    // One line longer than a read: pass it on in pieces rather than wait forever.
    if (text.size() < kMaxRead) return "";
    offset += text.size();
    return text + "\n";
  }
  text.resize(last_newline + 1);
  offset += text.size();
  return text;
}

std::optional<std::filesystem::path> previous_replica_log(
    const std::filesystem::path& logs_dir, const std::string& recipe,
    const std::vector<std::filesystem::path>& current) {
  namespace fs = std::filesystem;
  constexpr std::size_t kSuffix = 5;  // local/local_backend.cpp's new_replica_id
  std::optional<fs::path> newest;
  fs::file_time_type newest_time{};
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(logs_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() != recipe.size() + 1 + kSuffix + 4 || !name.starts_with(recipe + "-") ||
        !name.ends_with(".log"))
      continue;
    const std::string suffix = name.substr(recipe.size() + 1, kSuffix);
    if (suffix.find('-') != std::string::npos) continue;  // another recipe's ("a-b-...")
    if (std::any_of(current.begin(), current.end(),
                    [&](const fs::path& c) { return c.filename() == e.path().filename(); }))
      continue;
    std::error_code time_ec;
    const fs::file_time_type t = e.last_write_time(time_ec);
    if (time_ec) continue;
    if (!newest || t > newest_time) {
      newest = e.path();
      newest_time = t;
    }
  }
  return newest;
}

}  // namespace nibble::local

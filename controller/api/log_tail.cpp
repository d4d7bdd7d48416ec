#include "controller/api/log_tail.h"

#include <fstream>
#include <string_view>
#include <vector>

namespace nibble::controller {

std::string tail_lines(const std::filesystem::path& file, int lines) {
  constexpr std::streamoff kWindow = 1 << 20;
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in || lines <= 0) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > kWindow ? size - kWindow : 0;
  in.seekg(start);
  std::string text(static_cast<std::size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));

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

}  // namespace nibble::controller

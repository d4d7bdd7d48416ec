#include "http/api_keys.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace nibble::http {

ApiKeys::ApiKeys(std::vector<std::string> keys) {
  for (const std::string& k : keys) add(k);
}

void ApiKeys::add(const std::string& key) {
  if (key.empty()) throw std::runtime_error("an API key must not be empty");
  if (key.size() < kMinRecommendedKeyLength) {
    spdlog::warn(
        "an API key of {} characters is short enough to guess; use at least {} random "
        "characters (nibble-controller writes 64)",
        key.size(), kMinRecommendedKeyLength);
  }
  keys_.push_back(key);
}

void ApiKeys::add_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the API key file " + path);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH) != 0) {
    spdlog::warn(
        "the API key file {} is readable by every user of this machine (mode {:o}); "
        "chmod 600 it",
        path, st.st_mode & 0777);
  }
  std::size_t found = 0;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    const std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    add(line.substr(start));
    ++found;
  }
  if (found == 0) throw std::runtime_error("the API key file " + path + " holds no key");
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

bool ApiKeys::authorizes(const std::string& authorization) const {
  constexpr std::size_t kScheme = 6;  // "Bearer"
  if (authorization.size() <= kScheme + 1 ||
      strncasecmp(authorization.c_str(), "Bearer", kScheme) != 0 ||
      (authorization[kScheme] != ' ' && authorization[kScheme] != '\t')) {
    return false;
  }
  const std::size_t start = authorization.find_first_not_of(" \t", kScheme);
  if (start == std::string::npos) return false;
  const std::string presented = authorization.substr(start);
  bool match = false;
  for (const std::string& key : keys_) match |= constant_time_equal(presented, key);
  return match;
}

std::string generate_api_key() {
  unsigned char bytes[32];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("getrandom failed: ") + std::strerror(errno));
    }
    got += std::size_t(n);
  }
  static const char* const kHex = "0123456789abcdef";
  std::string key;
  for (unsigned char b : bytes) {
    key += kHex[b >> 4];
    key += kHex[b & 15];
  }
  return key;
}

void write_private_file(const std::string& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot create " + path + ": " + std::strerror(errno));
  // An existing file keeps its mode through O_CREAT: tighten it.
  const bool ok = ::fchmod(fd, 0600) == 0 &&
                  ::write(fd, content.data(), content.size()) == ssize_t(content.size());
  ::close(fd);
  if (!ok) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
}

}  // namespace nibble::http

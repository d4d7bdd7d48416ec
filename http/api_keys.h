#pragma once
// Bearer API keys: several may be valid at once (rotation), given on the command line or read
// from files (one key per line; blank lines and lines starting with '#' ignored). A request is
// authorized when its `Authorization` header is `Bearer <key>` for one of them; the scheme is
// matched case-insensitively (RFC 7235) and keys are compared in constant time.
#include <string>
#include <vector>

namespace nibble::http {

// Keys shorter than this are accepted with a warning (spdlog), as is a key file that every user
// of the machine can read.
inline constexpr std::size_t kMinRecommendedKeyLength = 16;

class ApiKeys {
 public:
  ApiKeys() = default;
  explicit ApiKeys(std::vector<std::string> keys);

  // Adds the keys of one file. Throws std::runtime_error naming the file when it cannot be
  // read or holds no key; warns when the file is world-readable.
  void add_file(const std::string& path);
  void add(const std::string& key);

  bool empty() const { return keys_.empty(); }
  std::size_t size() const { return keys_.size(); }
  // True when the Authorization header value carries one of the keys.
  bool authorizes(const std::string& authorization) const;

 private:
  std::vector<std::string> keys_;
};

// Compares without an early exit on the first differing byte, so that the time taken does not
// tell an attacker how much of a key is right.
bool constant_time_equal(const std::string& a, const std::string& b);

// A random key: 32 bytes from the OS's CSPRNG, hex-encoded (64 characters).
std::string generate_api_key();

// Writes `key` to `path`, creating it readable by the owner only (0600). Throws on failure.
void write_private_file(const std::string& path, const std::string& content);

}  // namespace nibble::http

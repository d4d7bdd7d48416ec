#include "engine/server/request_id.h"

#include <array>
#include <cstdint>
#include <random>

namespace nibble::server {

std::string new_response_id(std::string_view prefix) {
  static constexpr std::string_view kAlphabet =
      "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  // random_device is the kernel's source here (getrandom): no seed to share between replicas.
  thread_local std::random_device source;
  std::string id(prefix);
  for (int chunk = 0; chunk < 4; ++chunk) {
    std::uint64_t bits = (std::uint64_t(source()) << 32) | source();
    for (int i = 0; i < 6; ++i) {  // 6 characters of 62 use ~36 of the 64 bits
      id.push_back(kAlphabet[bits % kAlphabet.size()]);
      bits /= kAlphabet.size();
    }
  }
  return id;
}

}  // namespace nibble::server

#include "engine/tool_calls/tool_call_id.h"

#include <random>

namespace nibble::tool_calls {

std::string random_alphanumeric(int length) {
  static constexpr char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<int> pick(0, int(sizeof(kAlphabet)) - 2);
  std::string id;
  for (int k = 0; k < length; ++k) id += kAlphabet[pick(rng)];
  return id;
}

}  // namespace nibble::tool_calls

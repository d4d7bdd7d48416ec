#pragma once
// Response ids as OpenAI makes them: a prefix ("chatcmpl-", "cmpl-") and 24 random base62
// characters (~143 bits from the OS's random source). Unique across replicas and restarts, which
// an id built from the start time and a counter is not: two replicas started in the same second
// gave the same ids.
#include <string>
#include <string_view>

namespace nibble::server {

std::string new_response_id(std::string_view prefix);

}  // namespace nibble::server

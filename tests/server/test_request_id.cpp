// Response ids (engine/server/request_id.h): OpenAI's shape, and no two alike, also from two
// servers started in the same second (which the old start-time-and-counter ids were not).
#include "engine/server/request_id.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace nibble::server {
namespace {

TEST(ResponseId, OpenAisShapeAndNeverTwiceTheSame) {
  std::set<std::string> seen;
  for (int i = 0; i < 20000; ++i) {
    const std::string id = new_response_id(i % 2 ? "chatcmpl-" : "cmpl-");
    const std::string prefix = i % 2 ? "chatcmpl-" : "cmpl-";
    ASSERT_EQ(id.rfind(prefix, 0), 0u) << id;
    ASSERT_EQ(id.size(), prefix.size() + 24) << id;
    for (char c : id.substr(prefix.size()))
      ASSERT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << id;
    EXPECT_TRUE(seen.insert(id.substr(prefix.size())).second) << "repeated: " << id;
  }
}

}  // namespace
}  // namespace nibble::server

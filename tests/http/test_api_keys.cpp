// Bearer API keys: several keys, files, case-insensitive scheme, constant-time compare.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>

#include "http/api_keys.h"
#include "tests/support/temp_dir.h"

namespace nibble::http {
namespace {

TEST(ApiKeys, AnyOfSeveralKeysWithTheSchemeInAnyCase) {
  ApiKeys keys({"first-key", "second-key"});
  EXPECT_TRUE(keys.authorizes("Bearer first-key"));
  EXPECT_TRUE(keys.authorizes("Bearer second-key"));
  EXPECT_TRUE(keys.authorizes("bearer second-key"));
  EXPECT_TRUE(keys.authorizes("BEARER first-key"));
  EXPECT_TRUE(keys.authorizes("Bearer  first-key"));
  EXPECT_FALSE(keys.authorizes("Bearer first-ke"));
  EXPECT_FALSE(keys.authorizes("Bearer first-key2"));
  EXPECT_FALSE(keys.authorizes("Bearer"));
  EXPECT_FALSE(keys.authorizes("Bearer "));
  EXPECT_FALSE(keys.authorizes("Basic first-key"));
  EXPECT_FALSE(keys.authorizes("Bearerfirst-key"));
  EXPECT_FALSE(keys.authorizes("first-key"));
  EXPECT_FALSE(keys.authorizes(""));
  EXPECT_THROW(keys.add(""), std::runtime_error);
}

TEST(ApiKeys, ConstantTimeEqualComparesWholeStrings) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "ab"));
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_TRUE(constant_time_equal("", ""));
}

TEST(ApiKeys, FilesHoldOneKeyPerLineWithCommentsAndBlanks) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "keys").string();
  std::ofstream(path) << "# rotated monthly\n\n  old-key \nnew-key\r\n";
  ApiKeys keys;
  keys.add_file(path);
  EXPECT_EQ(keys.size(), 2u);
  EXPECT_TRUE(keys.authorizes("Bearer old-key"));
  EXPECT_TRUE(keys.authorizes("Bearer new-key"));
  EXPECT_FALSE(keys.authorizes("Bearer # rotated monthly"));

  const std::string empty = (dir.path() / "empty").string();
  std::ofstream(empty) << "# nothing\n";
  try {
    keys.add_file(empty);
    FAIL() << "a file without keys was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("holds no key"), std::string::npos) << e.what();
  }
  EXPECT_THROW(keys.add_file((dir.path() / "missing").string()), std::runtime_error);
}

TEST(ApiKeys, GeneratedKeysAreRandomAndStoredForTheOwnerOnly) {
  const std::string a = generate_api_key(), b = generate_api_key();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);

  testing::TempDir dir;
  const std::string path = (dir.path() / "token").string();
  std::ofstream(path) << "old";
  ::chmod(path.c_str(), 0644);
  write_private_file(path, a + "\n");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ApiKeys keys;
  keys.add_file(path);
  EXPECT_TRUE(keys.authorizes("Bearer " + a));
}

// What spdlog's default logger writes while one of these lives.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "captured", std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string text() const { return text_.str(); }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST(ApiKeys, ShortKeysAndWorldReadableKeyFilesAreWarnedAbout) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "keys").string();
  const std::string good(kMinRecommendedKeyLength, 'k');
  {
    std::ofstream(path) << good << "\n";
    ::chmod(path.c_str(), 0600);
    CapturedLog log;
    ApiKeys keys;
    keys.add_file(path);
    keys.add(good + "x");
    EXPECT_EQ(log.text(), "");
  }
  {
    ::chmod(path.c_str(), 0644);
    CapturedLog log;
    ApiKeys keys;
    keys.add_file(path);
    EXPECT_NE(log.text().find("readable by every user"), std::string::npos) << log.text();
    EXPECT_NE(log.text().find("644"), std::string::npos) << log.text();
  }
  {
    CapturedLog log;
    ApiKeys keys({"x"});
    EXPECT_TRUE(keys.authorizes("Bearer x"));  // accepted, but warned about
    EXPECT_NE(log.text().find("1 characters"), std::string::npos) << log.text();
    EXPECT_EQ(log.text().find("Bearer"), std::string::npos) << "the key must not be logged";
  }
}

}  // namespace
}  // namespace nibble::http

// --model-root: local model paths of recipes must resolve inside it; "..", symlinks pointing
// out and look-alike prefixes are refused, with the resolved path in the message.
#include <gtest/gtest.h>

#include <filesystem>

#include "controller/recipe/model_root.h"
#include "tests/support/temp_dir.h"

namespace nibble::recipe {
namespace {

namespace fs = std::filesystem;

std::vector<FieldError> check(const std::string& source, const fs::path& root) {
  std::vector<FieldError> errors;
  const ModelSource s = parse_model_source(source, errors);
  EXPECT_TRUE(errors.empty()) << source;
  check_model_root(s, root, errors);
  return errors;
}

TEST(ModelRoot, PathsInsideTheRootPass) {
  nibble::testing::TempDir dir;
  const fs::path root = dir.path() / "models";
  fs::create_directories(root / "qwen");
  EXPECT_TRUE(check((root / "qwen").string(), root).empty());
  EXPECT_TRUE(check("file://" + (root / "qwen").string(), root).empty());
  EXPECT_TRUE(check((root / "not-yet-there").string(), root).empty());
  EXPECT_TRUE(check((root / "qwen" / ".." / "qwen").string(), root).empty());
  EXPECT_TRUE(check("hf://org/name", root).empty());  // downloads go to the cache
  EXPECT_TRUE(check("/etc", "").empty());             // no root: nothing confined
}

TEST(ModelRoot, EscapesAreRefused) {
  nibble::testing::TempDir dir;
  const fs::path root = dir.path() / "models";
  fs::create_directories(root);
  fs::create_directories(dir.path() / "models-evil");
  fs::create_symlink("/etc", root / "link-out");
  const std::string resolved_root = fs::canonical(root).string();
  const auto dotdot = check((root / ".." / "models-evil").string(), root);
  ASSERT_EQ(dotdot.size(), 1u);
  EXPECT_EQ(dotdot[0].field, "spec.model.source");
  EXPECT_EQ(dotdot[0].message, "'" + (root / ".." / "models-evil").string() + "' resolves to " +
                                   fs::canonical(dir.path() / "models-evil").string() +
                                   ", outside the controller's --model-root " + resolved_root);
  EXPECT_EQ(check((dir.path() / "models-evil").string(), root).size(), 1u);  // not a prefix
  const auto link = check("file://" + (root / "link-out" / "passwd").string(), root);
  ASSERT_EQ(link.size(), 1u);
  EXPECT_NE(link[0].message.find("resolves to /etc/passwd"), std::string::npos) << link[0].message;
  EXPECT_EQ(check("/", root).size(), 1u);
}

}  // namespace
}  // namespace nibble::recipe

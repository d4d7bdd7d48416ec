// nibble-make-model's output directory and tokenizer (issue 45 item 11): an existing directory is
// refused unless --force, which deletes only the model files directly inside it; a model
// without a tokenizer, which the engine cannot serve, is made only on request.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace nibble {
namespace {

namespace fs = std::filesystem;
using nibble::testing::run_command;
using ::testing::HasSubstr;

const std::string kMake = NIBBLE_MAKE_MODEL;

nibble::testing::CommandResult make(const std::string& args, const fs::path& out) {
  return run_command(kMake + " --arch llama --preset tiny --seed 5 --threads 2 " + args +
                     " --output " + out.string() + " 2>&1");
}

void touch(const fs::path& path, const std::string& text = "x") {
  std::ofstream(path) << text;
}

TEST(MakeModelOutput, ExistingDirectoryNeedsForceWhichReplacesOnlyModelFiles) {
  nibble::testing::TempDir dir;
  const fs::path out = dir.path() / "m";
  auto r = make("--no-tokenizer --max-shard-mb 4", out);  // three shards and an index
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(fs::exists(out / "model-00003-of-00003.safetensors"));
  ASSERT_TRUE(fs::exists(out / "model.safetensors.index.json"));
  touch(out / "tokenizer.json", "{}");  // a stale tokenizer of another model
  touch(out / "notes.txt");
  fs::create_directory(out / "sub");
  touch(out / "sub/kept.safetensors");
  // A model file that is a link to a file outside: --force removes the link, not the file.
  touch(dir.path() / "outside.safetensors");
  fs::create_symlink(dir.path() / "outside.safetensors", out / "linked.safetensors");

  r = make("--no-tokenizer", out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("already exists"));
  EXPECT_THAT(r.output, HasSubstr("--force"));
  EXPECT_TRUE(fs::exists(out / "model-00003-of-00003.safetensors")) << "refused, yet changed";
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));

  r = make("--no-tokenizer --force", out);  // one file this time
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(out / "model.safetensors"));
  EXPECT_TRUE(fs::exists(out / "config.json"));
  for (const char* stale : {"model-00001-of-00003.safetensors", "model-00003-of-00003.safetensors",
                            "model.safetensors.index.json", "tokenizer.json", "linked.safetensors"})
    EXPECT_FALSE(fs::exists(fs::symlink_status(out / stale))) << stale;
  EXPECT_TRUE(fs::exists(out / "notes.txt"));
  EXPECT_TRUE(fs::exists(out / "sub/kept.safetensors"));
  EXPECT_TRUE(fs::exists(dir.path() / "outside.safetensors"));

  // An empty directory is fine without --force; a file in the way is not.
  fs::create_directory(dir.path() / "empty");
  EXPECT_EQ(make("--no-tokenizer", dir.path() / "empty").exit_code, 0);
  touch(dir.path() / "file");
  r = make("--no-tokenizer --force", dir.path() / "file");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("not a directory"));
}

TEST(MakeModelOutput, TokenizerIsRequiredUnlessRefusedExplicitly) {
  nibble::testing::TempDir dir;
  auto r = make("", dir.path() / "a");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--no-tokenizer"));
  EXPECT_FALSE(fs::exists(dir.path() / "a"));

  fs::create_directory(dir.path() / "tok");
  touch(dir.path() / "tok/tokenizer.json", "{}");
  r = make("--no-tokenizer --tokenizer " + (dir.path() / "tok").string(), dir.path() / "a");
  EXPECT_EQ(r.exit_code, 2) << r.output;

  // A tokenizer directory without tokenizer.json fails before anything is written.
  r = make("--tokenizer " + dir.path().string(), dir.path() / "b");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no tokenizer.json"));
  EXPECT_FALSE(fs::exists(dir.path() / "b"));

  r = make("--tokenizer " + (dir.path() / "tok").string(), dir.path() / "c");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir.path() / "c/tokenizer.json"));
}

TEST(MakeModelOutput, HelpAndVersionExitZero) {
  auto r = run_command(kMake + " --version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("nibble-make-model "));
  r = run_command(kMake + " --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("--no-tokenizer"));
  EXPECT_THAT(r.output, HasSubstr("--force"));
}

}  // namespace
}  // namespace nibble

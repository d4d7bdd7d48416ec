// spec.engine.extraArgs against the engine's own flag table: a recipe may tune the engine but
// never take over what the controller sets (where it listens, what it serves, files it reads).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "controller/recipe/recipe_parse.h"

namespace nibble::recipe {
namespace {

ParseResult with_extra_args(const std::string& flow_list) {
  return parse_model_recipe(
      "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata: {name: x}\n"
      "spec:\n  model: {source: /m}\n  engine:\n    extraArgs: " +
      flow_list + "\n");
}

// The one error the list got, as "field: message" ("" when it was accepted).
std::string only_error(const ParseResult& r) {
  if (r.errors.empty()) return "";
  EXPECT_EQ(r.errors.size(), 1u) << r.error_text();
  return r.errors[0].field + ": " + r.errors[0].message;
}

TEST(RecipeExtraArgs, TuningFlagsPass) {
  const ParseResult r = with_extra_args(
      R"(["--threads", "4", "--kv-cache-memory-bytes=536870912", "--log-level", "debug"])");
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_EQ(engine_args(r.recipe, "").back(), "debug");
}

TEST(RecipeExtraArgs, ControllerFlagsAreRefusedByName) {
  const char* owned[] = {"--host", "--port", "--config", "--api-key", "--served-model-name",
                         "--model"};
  for (const char* flag : owned) {
    const std::string e = only_error(with_extra_args(std::string("[\"") + flag + "\", \"v\"]"));
    EXPECT_EQ(e, std::string("spec.engine.extraArgs[0]: '") + flag +
                     "' is set by the controller and cannot be given in a recipe")
        << flag;
  }
  // The --flag=value form too, and not only as the first item.
  EXPECT_EQ(only_error(with_extra_args(R"(["--threads", "2", "--host=127.0.0.2"])")),
            "spec.engine.extraArgs[2]: '--host' is set by the controller and cannot be given "
            "in a recipe");
  EXPECT_EQ(only_error(with_extra_args(R"(["--config=/etc/shadow"])")),
            "spec.engine.extraArgs[0]: '--config' is set by the controller and cannot be given "
            "in a recipe");
}

TEST(RecipeExtraArgs, FlagsOfRecipeFieldsPointToTheField) {
  EXPECT_EQ(only_error(with_extra_args(R"(["--max-num-seqs", "8"])")),
            "spec.engine.extraArgs[0]: '--max-num-seqs' is set from spec.engine.maxNumSeqs; set "
            "it there");
  EXPECT_EQ(only_error(with_extra_args(R"(["--no-enable-prefix-caching"])")),
            "spec.engine.extraArgs[0]: '--no-enable-prefix-caching' is set from "
            "spec.engine.enablePrefixCaching; set it there");
}

TEST(RecipeExtraArgs, UnknownFlagsAndStrayValuesAreRefused) {
  EXPECT_EQ(only_error(with_extra_args(R"(["--no-such-flag"])")),
            "spec.engine.extraArgs[0]: unknown nibble-engine serve flag '--no-such-flag'");
  EXPECT_EQ(only_error(with_extra_args(R"(["--help"])")),
            "spec.engine.extraArgs[0]: unknown nibble-engine serve flag '--help'");
  EXPECT_EQ(only_error(with_extra_args(R"(["4"])")),
            "spec.engine.extraArgs[0]: expected a nibble-engine serve flag (--name), got '4'; a "
            "flag's value follows it as the next item");
  EXPECT_EQ(only_error(with_extra_args(R"(["--threads"])")),
            "spec.engine.extraArgs[0]: '--threads' needs a value");
  // A value that looks like a flag is the value of the flag before it, not a flag.
  EXPECT_EQ(only_error(with_extra_args(R"(["--log-level", "--host"])")),
            "spec.engine.extraArgs: --log-level must be one of trace, debug, info, warn, error, "
            "got '--host'");
}

TEST(RecipeExtraArgs, ValuesAreJudgedByTheEngineParser) {
  EXPECT_EQ(only_error(with_extra_args(R"(["--threads", "many"])")),
            "spec.engine.extraArgs: --threads expects an integer in [0, 1024], got 'many'");
  EXPECT_EQ(only_error(with_extra_args(R"(["--drain-timeout=-1"])")),
            "spec.engine.extraArgs: --drain-timeout expects a number in [0.000000, "
            "86400.000000], got '-1'");
}

}  // namespace
}  // namespace nibble::recipe

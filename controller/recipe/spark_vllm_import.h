#pragma once
// `nibble import`: a spark-vllm-docker recipe (recipe_version, name, description, model,
// container, solo_only, cluster_only, defaults, command: "vllm serve MODEL --flags…" with
// {param} placeholders) → a ModelRecipe. vLLM flags with a Nibble equivalent are mapped to recipe
// fields, flags nibble-engine serve shares with vLLM (--reasoning-parser, --tool-call-parser,
// --enable-auto-tool-choice, ...) go to spec.engine.extraArgs when the engine accepts their
// value; every other flag is listed with the reason it was dropped, never silently lost.
#include <string>
#include <vector>

#include "controller/recipe/model_recipe.h"

namespace nibble::recipe {

struct DroppedFlag {
  std::string flag;  // as written, with its value if it had one
  std::string reason;
};

struct ImportResult {
  ModelRecipe recipe;
  std::vector<DroppedFlag> dropped;
  std::vector<std::string> errors;  // the import failed if not empty
  bool ok() const { return errors.empty(); }
};

ImportResult import_spark_vllm_recipe(const std::string& yaml_text);

// What `nibble import SOURCE_PATH` prints: a comment naming the source, one comment per dropped
// flag, then the recipe's YAML (examples/recipes/qwen3-30b-a3b-imported.yaml is one).
std::string imported_recipe_text(const std::string& source_path, const ImportResult& result);

// Splits a shell command line as sh would for words: quotes, backslash escapes and
// backslash-newline continuations. Throws std::invalid_argument on an unclosed quote.
std::vector<std::string> split_command_line(const std::string& command);
// A DNS-1123 label made from a free-form name ("Nemotron-3-Nano-NVFP4" → "nemotron-3-nano-nvfp4").
std::string to_dns1123_label(const std::string& name);

}  // namespace nibble::recipe

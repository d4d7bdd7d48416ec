// nibble: the command-line client of Nibble's controller. Today: `import` (spark-vllm-docker
// recipes → ModelRecipe) and `validate`; apply/get/describe/delete come with the controller.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "controller/recipe/recipe_parse.h"
#include "controller/recipe/recipe_yaml.h"
#include "controller/recipe/spark_vllm_import.h"

namespace {

constexpr const char* kUsage = R"(usage: nibble <command> [args]

commands:
  import FILE     convert a spark-vllm-docker recipe to a ModelRecipe (YAML on stdout;
                  dropped vLLM flags listed on stderr)
  validate FILE   check a ModelRecipe; prints every problem with its field
)";

bool read_file(const char* path, std::string& out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

int run_import(const char* path) {
  std::string text;
  if (!read_file(path, text)) {
    std::fprintf(stderr, "nibble import: cannot read %s\n", path);
    return 2;
  }
  const nibble::recipe::ImportResult r = nibble::recipe::import_spark_vllm_recipe(text);
  if (!r.ok()) {
    for (const std::string& e : r.errors)
      std::fprintf(stderr, "nibble import: %s: %s\n", path, e.c_str());
    return 1;
  }
  std::printf("# imported from %s by nibble import\n", path);
  for (const auto& d : r.dropped)
    std::printf("# dropped vLLM flag %s: %s\n", d.flag.c_str(), d.reason.c_str());
  std::fputs(nibble::recipe::to_yaml(r.recipe).c_str(), stdout);
  for (const auto& d : r.dropped) {
    std::fprintf(stderr, "nibble import: dropped %s (%s)\n", d.flag.c_str(), d.reason.c_str());
  }
  return 0;
}

int run_validate(const char* path) {
  std::string text;
  if (!read_file(path, text)) {
    std::fprintf(stderr, "nibble validate: cannot read %s\n", path);
    return 2;
  }
  const nibble::recipe::ParseResult r = nibble::recipe::parse_model_recipe(text);
  if (!r.ok()) {
    std::fprintf(stderr, "%s", r.error_text().c_str());
    return 1;
  }
  std::printf("%s: ModelRecipe '%s' is valid\n", path, r.recipe.name.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  if ((command == "import" || command == "validate") && argc != 3) {
    std::fprintf(stderr, "usage: nibble %s FILE\n", command.c_str());
    return 2;
  }
  if (command == "import") return run_import(argv[2]);
  if (command == "validate") return run_validate(argv[2]);
  std::fprintf(stderr, "nibble: unknown command '%s'\n\n%s", command.c_str(), kUsage);
  return 2;
}

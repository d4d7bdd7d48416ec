// nibble: the command-line client of Nibble's controller: apply/get/describe/delete/wait/logs
// through the controller's local API (controller_commands.h), plus `import` (spark-vllm-docker
// recipes → ModelRecipe), `validate` and `pull` (hf:// models into the cache), which work
// without a controller.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "controller/cli/controller_commands.h"
#include "controller/cli/render_command.h"
#include "controller/kube/render_flags.h"
#include "controller/recipe/recipe_parse.h"
#include "controller/recipe/recipe_yaml.h"
#include "controller/recipe/spark_vllm_import.h"
#include "controller/source/model_downloader.h"

namespace {

constexpr const char* kUsage = R"(usage: nibble <command> [args]

commands (through a running nibble-controller; --controller URL or $NIBBLE_CONTROLLER,
default http://127.0.0.1:8001):
  apply -f FILE [-f FILE...] [--dry-run]
                  create or update recipes (FILE may hold several, separated by ---;
                  - reads stdin)
  get recipes [NAME...] [-o wide|json]
                  phase, ready/desired replicas and endpoint of each recipe
  describe recipe NAME
                  status, conditions, engines (pid, port, log file) and spec
  delete recipe NAME... | delete -f FILE
                  remove recipes; their engines drain and stop
  wait recipe/NAME [--for condition=Ready] [--timeout 300s]
                  block until the condition is True
  logs recipe/NAME [--tail N]
                  the last N (50) lines of each engine's log, prefixed with its id

commands (local):
  import FILE     convert a spark-vllm-docker recipe to a ModelRecipe (YAML on stdout;
                  dropped vLLM flags listed on stderr)
  validate FILE   check a ModelRecipe; prints every problem with its field
  render -f FILE [--namespace NS] [--engine-image IMAGE] [-o yaml|json] ...
                  print the Kubernetes objects (Deployment, Service) the controller
                  applies for each recipe; `nibble render --help` lists the flags
  pull hf://org/name[@revision] [CACHE_DIR]
                  download the files serving needs into CACHE_DIR (default
                  $NIBBLE_CACHE or ~/.cache/nibble), resuming interrupted files;
                  HF_TOKEN for gated repos, HF_ENDPOINT for a mirror
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
  std::fputs(nibble::recipe::imported_recipe_text(path, r).c_str(), stdout);
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

int run_pull(const std::string& source_text, std::string cache_dir) {
  std::vector<nibble::recipe::FieldError> errors;
  const nibble::recipe::ModelSource source =
      nibble::recipe::parse_model_source(source_text, errors);
  if (!errors.empty() || source.kind != nibble::recipe::ModelSource::Kind::kHuggingFace) {
    std::fprintf(stderr, "nibble pull: '%s' is not hf://org/name[@revision]\n",
                 source_text.c_str());
    return 2;
  }
  if (cache_dir.empty()) {
    const char* env = std::getenv("NIBBLE_CACHE");
    const char* home = std::getenv("HOME");
    cache_dir = env ? env : std::string(home ? home : ".") + "/.cache/nibble";
  }
  nibble::source::DownloadOptions options = nibble::source::download_options_from_env();
  nibble::source::TerminalProgressBar bar;
  options.on_progress = [&bar](const nibble::source::DownloadProgress& p) { bar.update(p); };
  try {
    const auto dir = nibble::source::ModelDownloader(options).download(source, cache_dir);
    bar.finish();
    std::printf("%s\n", dir.c_str());
    return 0;
  } catch (const nibble::source::SourceError& e) {
    bar.finish();
    std::fprintf(stderr, "nibble pull: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // `nibble --controller URL COMMAND ...` as well as `nibble COMMAND ... --controller URL`.
  if (argc >= 3 && !std::strcmp(argv[1], "--controller")) {
    setenv("NIBBLE_CONTROLLER", argv[2], 1);
    argv += 2;
    argc -= 2;
  }
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  if ((command == "import" || command == "validate") && argc != 3) {
    std::fprintf(stderr, "usage: nibble %s FILE\n", command.c_str());
    return 2;
  }
  if (command == "pull") {
    if (argc != 3 && argc != 4) {
      std::fprintf(stderr, "usage: nibble pull hf://org/name[@revision] [CACHE_DIR]\n");
      return 2;
    }
    return run_pull(argv[2], argc == 4 ? argv[3] : "");
  }
  const std::vector<std::string> rest(argv + 2, argv + argc);
  if (command == "render") {
    if (argc == 3 && (!std::strcmp(argv[2], "--help") || !std::strcmp(argv[2], "-h"))) {
      std::printf("%s%s", nibble::cli::render_usage(), nibble::kube::render_flags_usage());
      return 0;
    }
    return nibble::cli::run_render(rest, std::cout, std::cerr);
  }
  if (command == "apply") return nibble::cli::run_apply(rest);
  if (command == "get") return nibble::cli::run_get(rest);
  if (command == "describe") return nibble::cli::run_describe(rest);
  if (command == "delete") return nibble::cli::run_delete(rest);
  if (command == "wait") return nibble::cli::run_wait(rest);
  if (command == "logs") return nibble::cli::run_logs(rest);
  if (command == "import") return run_import(argv[2]);
  if (command == "validate") return run_validate(argv[2]);
  std::fprintf(stderr, "nibble: unknown command '%s'\n\n%s", command.c_str(), kUsage);
  return 2;
}

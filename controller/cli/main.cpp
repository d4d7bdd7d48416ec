// nibble: the command-line client of Nibble's controller: apply/get/describe/delete/scale/wait/
// logs through the controller's local API (controller_commands.h), plus `import`
// (spark-vllm-docker recipes → ModelRecipe), `validate`, `render`, `pull` (hf:// models into the
// cache) and `completion`, which work without a controller. The commands and their usage are
// listed once, in command_usage.h.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "controller/cli/command_usage.h"
#include "controller/cli/completion.h"
#include "controller/cli/controller_commands.h"
#include "controller/cli/render_command.h"
#include "controller/recipe/recipe_parse.h"
#include "controller/recipe/recipe_yaml.h"
#include "controller/recipe/spark_vllm_import.h"
#include "controller/source/model_downloader.h"

namespace {

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
  if (cache_dir.empty()) cache_dir = nibble::source::default_model_cache_dir().string();
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
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(nibble::cli::nibble_usage().c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  if (command == "--version") {
    std::printf("nibble %s\n", NIBBLE_VERSION);
    return 0;
  }
  const nibble::cli::CommandUsage* usage = nibble::cli::find_command(command);
  if (usage == nullptr) {
    std::fprintf(stderr, "nibble: unknown command '%s'\n\n%s", command.c_str(),
                 nibble::cli::nibble_usage().c_str());
    return 2;
  }
  const std::vector<std::string> rest(argv + 2, argv + argc);
  for (const std::string& arg : rest) {
    if (arg == "--help" || arg == "-h") {
      std::fputs(nibble::cli::command_usage(*usage).c_str(), stdout);
      return 0;
    }
  }
  if (command == "version") {
    std::printf("nibble %s\n", NIBBLE_VERSION);
    return 0;
  }
  if (command == "completion") {
    if (rest.size() != 1 || rest[0] != "bash") {
      std::fprintf(stderr, "usage: nibble completion bash (the only shell supported)\n");
      return 2;
    }
    std::fputs(nibble::cli::bash_completion().c_str(), stdout);
    return 0;
  }
  if ((command == "import" || command == "validate") && rest.size() != 1) {
    std::fprintf(stderr, "usage: nibble %s FILE\n", command.c_str());
    return 2;
  }
  if (command == "pull") {
    if (rest.size() != 1 && rest.size() != 2) {
      std::fprintf(stderr, "usage: nibble pull hf://org/name[@revision] [CACHE_DIR]\n");
      return 2;
    }
    return run_pull(rest[0], rest.size() == 2 ? rest[1] : "");
  }
  if (command == "render") return nibble::cli::run_render(rest, std::cout, std::cerr);
  if (command == "apply") return nibble::cli::run_apply(rest);
  if (command == "get") return nibble::cli::run_get(rest);
  if (command == "describe") return nibble::cli::run_describe(rest);
  if (command == "delete") return nibble::cli::run_delete(rest);
  if (command == "scale") return nibble::cli::run_scale(rest);
  if (command == "wait") return nibble::cli::run_wait(rest);
  if (command == "logs") return nibble::cli::run_logs(rest);
  if (command == "import") return run_import(rest[0].c_str());
  return run_validate(rest[0].c_str());
}

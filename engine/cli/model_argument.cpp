#include "engine/cli/model_argument.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#include "controller/recipe/recipe_parse.h"

namespace nibble::engine::cli {
namespace {

namespace fs = std::filesystem;

// A Hub repo id part: letters, digits, '-', '_', '.', and not "." or "..".
bool is_repo_part(const std::string& part) {
  if (part.empty() || part == "." || part == ".." || part.size() > 96) return false;
  for (char c : part) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// "org/name" or "org/name@revision" as written without hf:// (vLLM's --model Qwen/Qwen3-8B).
bool looks_like_hub_id(const std::string& model) {
  const std::string repo = model.substr(0, model.find('@'));
  const auto slash = repo.find('/');
  return slash != std::string::npos && is_repo_part(repo.substr(0, slash)) &&
         is_repo_part(repo.substr(slash + 1));
}

// Logs a long download's progress every few seconds.
std::function<void(const source::DownloadProgress&)> progress_logger(const std::string& name) {
  auto last = std::make_shared<std::chrono::steady_clock::time_point>();
  return [name, last](const source::DownloadProgress& p) {
    const auto now = std::chrono::steady_clock::now();
    if (now - *last < std::chrono::seconds(5) || p.overall_total == 0) return;
    *last = now;
    spdlog::info("downloading {}: {}% of {} MiB, file {} of {}", name,
                 p.overall_done * 100 / p.overall_total, p.overall_total >> 20, p.files_done + 1,
                 p.files_total);
  };
}

}  // namespace

LocalModel resolve_model_argument(const std::string& model, const ModelLookup& lookup) {
  std::error_code error;
  if (fs::is_directory(model, error)) return {fs::path(model), ""};
  if (fs::exists(model, error))
    throw std::runtime_error("'" + model + "' is a file; pass the model's directory");
  const bool hub = model.starts_with("hf://") || looks_like_hub_id(model);
  if (!hub) throw std::runtime_error("no model directory '" + model + "'");

  std::vector<recipe::FieldError> errors;
  const recipe::ModelSource source =
      recipe::parse_model_source(model.starts_with("hf://") ? model : "hf://" + model, errors);
  if (!errors.empty()) {
    throw std::runtime_error("'" + model + "' is not a directory, nor hf://org/name[@revision]");
  }
  const std::string hf =
      "hf://" + source.repo + (source.revision == "main" ? "" : "@" + source.revision);
  if (auto dir = source::cached_model_dir(source, lookup.cache_dir)) {
    spdlog::info("{}: from the model cache, {}", hf, dir->string());
    return {*dir, source.repo};
  }
  spdlog::info("{}: not in the model cache {}; downloading it from {}", hf,
               lookup.cache_dir.string(), lookup.hub.endpoint);
  source::DownloadOptions options = lookup.hub;
  options.on_progress = progress_logger(hf);
  try {
    return {source::ModelDownloader(options).download(source, lookup.cache_dir), source.repo};
  } catch (const source::SourceError& e) {
    const std::string where =
        model.starts_with("hf://") ? "" : "there is no directory '" + model + "', and ";
    throw std::runtime_error(where + hf + " is not in the model cache " +
                             lookup.cache_dir.string() +
                             ", and downloading it failed: " + e.what() +
                             ". Fetch it where the Hub is reachable with `nibble pull " + hf +
                             "` (into this cache, or pass its cache as --download-dir), or "
                             "pass a model directory");
  }
}

}  // namespace nibble::engine::cli

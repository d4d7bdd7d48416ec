#include "controller/loop/model_resolver.h"

#include <spdlog/spdlog.h>

namespace nibble::controller {
namespace fs = std::filesystem;

namespace {

std::string describe(const source::DownloadProgress& p) {
  if (p.overall_total == 0) return "listing files";
  return std::to_string(p.overall_done * 100 / p.overall_total) + "% of " +
         std::to_string(p.overall_total >> 20) + " MiB";
}
}  // namespace

ModelResolver::ModelResolver(fs::path cache_dir, source::DownloadOptions options)
    : cache_dir_(std::move(cache_dir)), options_(std::move(options)) {}

ModelResolver::~ModelResolver() = default;

ResolvedModel ModelResolver::resolve(const recipe::ModelSource& source) {
  if (source.kind == recipe::ModelSource::Kind::kFile) {
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(source.path) / "config.json", ec)) {
      return {ResolvedModel::State::kFailed,
              {},
              "model directory " + source.path + " has no config.json (does it exist?)"};
    }
    // Relative paths are relative to the controller's working directory; engines get it absolute.
    return {ResolvedModel::State::kReady, fs::absolute(source.path, ec), ""};
  }
  if (auto dir = source::cached_model_dir(source, cache_dir_))
    return {ResolvedModel::State::kReady, *dir, ""};

  std::shared_ptr<Download> d;
  {
    std::lock_guard lock(mutex_);
    auto& slot = downloads_[source.original];
    if (!slot) slot = std::make_shared<Download>();
    d = slot;
  }
  std::lock_guard lock(d->mutex);
  const bool retry_due = d->result.state == ResolvedModel::State::kFailed &&
                         std::chrono::steady_clock::now() - d->failed_at >= retry_after_;
  if (!d->running && (d->failed_at == std::chrono::steady_clock::time_point{} || retry_due)) {
    d->running = true;
    d->result = {ResolvedModel::State::kDownloading, {}, "starting download of " + source.original};
    start_download(source, d);
  }
  return d->result;
}

void ModelResolver::start_download(const recipe::ModelSource& source,
                                   const std::shared_ptr<Download>& d) {
  source::DownloadOptions options = options_;
  options.on_progress = [d](const source::DownloadProgress& p) {
    std::lock_guard lock(d->mutex);
    d->result.message = "downloading: " + describe(p);
  };
  // Detached: the controller may exit mid-download; the .incomplete files resume next time.
  std::thread([this_cache = cache_dir_, options, source, d] {
    ResolvedModel result;
    try {
      spdlog::info("downloading {} into {}", source.original, this_cache.string());
      const fs::path dir = source::ModelDownloader(options).download(source, this_cache);
      result = {ResolvedModel::State::kReady, dir, ""};
      spdlog::info("downloaded {} to {}", source.original, dir.string());
    } catch (const std::exception& e) {
      result = {ResolvedModel::State::kFailed, {}, e.what()};
      spdlog::error("download of {} failed: {}", source.original, e.what());
    }
    std::lock_guard lock(d->mutex);
    d->running = false;
    if (result.state == ResolvedModel::State::kFailed)
      d->failed_at = std::chrono::steady_clock::now();
    d->result = std::move(result);
  }).detach();
}

}  // namespace nibble::controller

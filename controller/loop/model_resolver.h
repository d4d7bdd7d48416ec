#pragma once
// Turns a recipe's model source into a local directory the engine can load. Paths are checked
// (config.json present); hf:// sources are downloaded on a background thread, one per source,
// so a long download never stalls the reconcile pass, and marked complete
// (.nibble-download-complete) so a restarted controller starts engines at once, even offline.
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "controller/recipe/model_recipe.h"
#include "controller/source/model_downloader.h"

namespace nibble::controller {

struct ResolvedModel {
  enum class State { kReady, kDownloading, kFailed };
  State state = State::kFailed;
  std::filesystem::path dir;  // when kReady
  std::string message;        // progress while downloading, the error when failed
};

class ModelResolver {
 public:
  ModelResolver(std::filesystem::path cache_dir, source::DownloadOptions options);
  ~ModelResolver();  // downloads run detached: an exit mid-download resumes next time

  // Non-blocking. A failed download is retried after `retry_after` on a later call.
  ResolvedModel resolve(const recipe::ModelSource& source);

 private:
  struct Download {
    std::mutex mutex;
    ResolvedModel result;
    bool running = false;
    std::chrono::steady_clock::time_point failed_at{};
  };
  void start_download(const recipe::ModelSource& source, const std::shared_ptr<Download>& d);

  std::filesystem::path cache_dir_;
  source::DownloadOptions options_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Download>> downloads_;  // by source.original
  std::chrono::seconds retry_after_{30};
};

}  // namespace nibble::controller

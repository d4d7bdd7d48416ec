// controller/source/model_downloader.h: fetches an hf://org/name[@rev] model into a local
// cache with the Hugging Face Hub's HTTP layout:
//   file list  GET {endpoint}/api/models/{org}/{name}/revision/{rev}?blobs=true (siblings[])
//   each file  GET {endpoint}/{org}/{name}/resolve/{rev}/{path}  (redirects followed, to
//              other hosts too; the token is only sent to the endpoint's own host)
// Only the files serving needs (hub_files.h) land in cache_dir/models--org--name/<rev>/.
// Each is written to <file>.incomplete, resumed with a Range request after an interruption,
// checked against Content-Length / Content-Range and renamed into place when complete, so a
// file without the suffix is always whole and is skipped next time. Every failure throws
// SourceError with a message that says what to do; nothing aborts. A finished download leaves
// kDownloadCompleteMarker in its directory: `nibble pull`, the controller and `nibble-engine
// serve org/name` all read the same cache through cached_model_dir().
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

#include "controller/recipe/model_recipe.h"
#include "controller/source/progress_bar.h"

namespace nibble::source {

class SourceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct DownloadOptions {
  std::string endpoint = "https://huggingface.co";  // no trailing slash needed
  std::string token;                                // empty: anonymous
  int max_attempts = 3;      // per file; each retry resumes where the last one stopped
  int timeout_seconds = 60;  // connect and read timeout per request
  int max_redirects = 10;
  std::function<void(const DownloadProgress&)> on_progress;  // optional
};

// Options from the environment: HF_ENDPOINT (default https://huggingface.co) and HF_TOKEN.
DownloadOptions download_options_from_env();

// The directory the files of `source` go to: cache_dir/models--org--name/<revision with '/'
// replaced by "--">.
std::filesystem::path model_cache_dir(const recipe::ModelSource& source,
                                      const std::filesystem::path& cache_dir);

// The model cache when none is named: $NIBBLE_CACHE, else $HOME/.cache/nibble.
std::filesystem::path default_model_cache_dir();

// Written into a model's cache directory once every file of it is in place.
inline constexpr const char* kDownloadCompleteMarker = ".nibble-download-complete";

// model_cache_dir(source, cache_dir) when a download of `source` completed there, else nullopt.
std::optional<std::filesystem::path> cached_model_dir(const recipe::ModelSource& source,
                                                      const std::filesystem::path& cache_dir);

class ModelDownloader {
 public:
  explicit ModelDownloader(DownloadOptions options);
  // Returns the local model directory, marked complete; throws SourceError.
  std::filesystem::path download(const recipe::ModelSource& source,
                                 const std::filesystem::path& cache_dir);

 private:
  DownloadOptions options_;
};

}  // namespace nibble::source

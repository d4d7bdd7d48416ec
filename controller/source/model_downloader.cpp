#include "controller/source/model_downloader.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>
#include <vector>

#include "controller/source/hub_files.h"
#include "controller/source/hub_http.h"

namespace nibble::source {

namespace fs = std::filesystem;

namespace {

struct RepoFile {
  std::string name;
  uint64_t size = 0;  // 0 when the listing did not say
};

std::string http_failure(const recipe::ModelSource& source, const HttpFetch& fetch) {
  const std::string repo = "hf://" + source.repo + "@" + source.revision;
  if (!fetch.transport_error.empty()) {
    return repo + ": network error fetching " + fetch.url + ": " + fetch.transport_error +
           " (check the connection or HF_ENDPOINT)";
  }
  const std::string code = "HTTP " + std::to_string(fetch.status);
  if (fetch.status == 401 || fetch.status == 403) {
    return repo + ": " + code + " from " + fetch.url +
           ": the repo is gated or private; set HF_TOKEN to a token with access (and accept "
           "the model's terms on its Hub page)";
  }
  if (fetch.status == 404) {
    return repo + ": " + code + " from " + fetch.url +
           ": no such repo or revision (check the org/name and the @revision)";
  }
  return repo + ": unexpected " + code + " from " + fetch.url;
}

// Parses "bytes FIRST-LAST/TOTAL"; false when it is not of that form.
bool parse_content_range(const std::string& value, uint64_t& first, uint64_t& total) {
  unsigned long long a = 0, b = 0, t = 0;
  if (std::sscanf(value.c_str(), "bytes %llu-%llu/%llu", &a, &b, &t) != 3) return false;
  first = a;
  total = t;
  return true;
}

uint64_t size_or_zero(const fs::path& path) {
  std::error_code error;
  const auto size = fs::file_size(path, error);
  return error ? 0 : size;
}

class RepoDownload {
 public:
  RepoDownload(const DownloadOptions& options, const recipe::ModelSource& source, fs::path dir)
      : options_(options), source_(source), dir_(std::move(dir)) {}

  std::vector<RepoFile> list_files() {
    std::string body;
    HttpRequest request =
        make_request(options_.endpoint + "/api/models/" + source_.repo + "/revision/" +
                     percent_encode(source_.revision, false) + "?blobs=true");
    const HttpFetch fetch = http_get(
        request, [](const HttpFetch& f) { return f.status == 200; },
        [&](const char* data, size_t size) {
          body.append(data, size);
          return true;
        });
    if (fetch.status != 200 || !fetch.transport_error.empty()) {
      throw SourceError(http_failure(source_, fetch));
    }
    const nlohmann::json listing = nlohmann::json::parse(body, nullptr, false);
    if (listing.is_discarded() || !listing.contains("siblings") ||
        !listing["siblings"].is_array()) {
      throw SourceError("hf://" + source_.repo + ": " + fetch.url +
                        ": expected JSON with a siblings array");
    }
    std::vector<RepoFile> files;
    for (const auto& sibling : listing["siblings"]) {
      if (!sibling.is_object() || !sibling.contains("rfilename") ||
          !sibling["rfilename"].is_string()) {
        throw SourceError("hf://" + source_.repo + ": siblings[] entry without rfilename");
      }
      const std::string name = sibling["rfilename"].get<std::string>();
      if (!is_safe_relative_path(name)) {
        throw SourceError("hf://" + source_.repo + ": server sent unsafe file path '" + name +
                          "' (absolute or containing '..')");
      }
      if (!is_needed_for_serving(name)) continue;
      RepoFile file{name, 0};
      if (sibling.contains("size") && sibling["size"].is_number_unsigned()) {
        file.size = sibling["size"].get<uint64_t>();
      }
      files.push_back(file);
    }
    if (files.empty()) {
      throw SourceError("hf://" + source_.repo + "@" + source_.revision +
                        ": no config.json, tokenizer or *.safetensors files in the repo");
    }
    return files;
  }

  void run(const std::vector<RepoFile>& files) {
    progress_.files_total = static_cast<int>(files.size());
    for (const RepoFile& file : files) progress_.overall_total += file.size;
    for (const RepoFile& file : files) {
      const fs::path target = dir_ / file.name;
      if (fs::exists(target)) {  // only a verified download is ever renamed to this name
        spdlog::debug("model source: {} already complete", file.name);
        completed_bytes_ += size_or_zero(target);
      } else {
        fetch_file(file, target);
        completed_bytes_ += size_or_zero(target);
      }
      ++progress_.files_done;
    }
  }

 private:
  HttpRequest make_request(const std::string& url) const {
    HttpRequest request;
    request.url = url;
    request.bearer_token = options_.token;
    request.token_origin = parse_http_url(options_.endpoint).origin;
    request.timeout_seconds = options_.timeout_seconds;
    request.max_redirects = options_.max_redirects;
    return request;
  }

  void report(const std::string& name, uint64_t done, uint64_t total) {
    if (!options_.on_progress) return;
    progress_.file = name;
    progress_.file_done = done;
    progress_.file_total = total;
    progress_.overall_done = completed_bytes_ + done;
    options_.on_progress(progress_);
  }

  void fetch_file(const RepoFile& file, const fs::path& target) {
    fs::create_directories(target.parent_path());
    const fs::path partial = fs::path(target.string() + ".incomplete");
    const std::string url = options_.endpoint + "/" + source_.repo + "/resolve/" +
                            percent_encode(source_.revision, false) + "/" +
                            percent_encode(file.name, true);
    std::string last_error;
    for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
      uint64_t have = size_or_zero(partial);
      uint64_t total = 0;
      bool size_known = false;
      std::FILE* out = nullptr;
      HttpRequest request = make_request(url);
      if (have > 0) request.range = "bytes=" + std::to_string(have) + "-";

      const auto open = [&](const char* mode) {
        out = std::fopen(partial.c_str(), mode);
        return out != nullptr;
      };
      const HttpFetch fetch = http_get(
          request,
          [&](const HttpFetch& f) {
            if (f.status == 206) {
              uint64_t first = 0;
              if (!parse_content_range(header_value(f, "Content-Range"), first, total) ||
                  first != have) {
                return false;  // not the range we asked for: start over below
              }
              size_known = true;
              return open("ab");
            }
            if (f.status == 200) {  // whole file: the server ignored or we sent no Range
              have = 0;
              const std::string length = header_value(f, "Content-Length");
              size_known = !length.empty();
              if (size_known) total = std::strtoull(length.c_str(), nullptr, 10);
              return open("wb");
            }
            return false;
          },
          [&](const char* data, size_t size) {
            if (std::fwrite(data, 1, size, out) != size) return false;
            have += size;
            report(file.name, have, size_known ? total : file.size);
            return true;
          });
      if (out) std::fclose(out);
      const uint64_t on_disk = size_or_zero(partial);

      if (fetch.status == 206 && !size_known) {  // unusable Content-Range: restart from 0
        fs::remove(partial);
        last_error = "bad Content-Range from " + fetch.url;
        continue;
      }
      if (fetch.status == 416) {  // our partial file is not a prefix the server agrees with
        fs::remove(partial);
        last_error = "HTTP 416 for a resumed range of " + fetch.url;
        continue;
      }
      if (fetch.status != 200 && fetch.status != 206 && fetch.transport_error.empty()) {
        throw SourceError(http_failure(source_, fetch) + " (file " + file.name + ")");
      }
      if (fetch.status == 0 || !fetch.transport_error.empty()) {
        last_error = http_failure(source_, fetch);
        spdlog::warn("model source: {} interrupted at {} bytes (attempt {}/{}): {}", file.name,
                     on_disk, attempt, options_.max_attempts, fetch.transport_error);
        continue;  // the next attempt resumes with a Range request
      }
      if (size_known && on_disk != total) {
        last_error = file.name + ": got " + std::to_string(on_disk) + " bytes, expected " +
                     std::to_string(total);
        continue;
      }
      std::error_code error;
      fs::rename(partial, target, error);
      if (error) {
        throw SourceError("cannot rename " + partial.string() + " to " + target.string() + ": " +
                          error.message());
      }
      report(file.name, on_disk, on_disk);
      return;
    }
    throw SourceError("hf://" + source_.repo + ": giving up on " + file.name + " after " +
                      std::to_string(options_.max_attempts) + " attempts: " + last_error);
  }

  const DownloadOptions& options_;
  const recipe::ModelSource& source_;
  fs::path dir_;
  DownloadProgress progress_;
  uint64_t completed_bytes_ = 0;
};

}  // namespace

DownloadOptions download_options_from_env() {
  DownloadOptions options;
  if (const char* endpoint = std::getenv("HF_ENDPOINT"); endpoint && *endpoint) {
    options.endpoint = endpoint;
  }
  if (const char* token = std::getenv("HF_TOKEN"); token && *token) options.token = token;
  return options;
}

fs::path model_cache_dir(const recipe::ModelSource& source, const fs::path& cache_dir) {
  std::string repo_dir = "models--" + source.repo;
  std::string revision = source.revision.empty() ? "main" : source.revision;
  for (size_t at; (at = repo_dir.find('/')) != std::string::npos;) repo_dir.replace(at, 1, "--");
  for (size_t at; (at = revision.find('/')) != std::string::npos;) revision.replace(at, 1, "--");
  return cache_dir / repo_dir / revision;
}

fs::path default_model_cache_dir() {
  if (const char* cache = std::getenv("NIBBLE_CACHE"); cache && *cache) return cache;
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : ".") / ".cache" / "nibble";
}

std::optional<fs::path> cached_model_dir(const recipe::ModelSource& source,
                                         const fs::path& cache_dir) {
  const fs::path dir = model_cache_dir(source, cache_dir);
  std::error_code error;
  if (fs::exists(dir / kDownloadCompleteMarker, error)) return dir;
  return std::nullopt;
}

ModelDownloader::ModelDownloader(DownloadOptions options) : options_(std::move(options)) {
  while (!options_.endpoint.empty() && options_.endpoint.back() == '/')
    options_.endpoint.pop_back();
}

fs::path ModelDownloader::download(const recipe::ModelSource& source, const fs::path& cache_dir) {
  if (source.kind != recipe::ModelSource::Kind::kHuggingFace) {
    throw SourceError("model source '" + source.original + "' is not an hf:// source");
  }
  const size_t slash = source.repo.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == source.repo.size() ||
      source.repo.find('/', slash + 1) != std::string::npos ||
      !is_safe_relative_path(source.repo)) {
    throw SourceError("model source '" + source.original + "': repo '" + source.repo +
                      "' must be org/name");
  }
  if (source.revision.find("..") != std::string::npos) {
    throw SourceError("model source '" + source.original + "': revision must not contain '..'");
  }
  recipe::ModelSource resolved = source;
  if (resolved.revision.empty()) resolved.revision = "main";
  const fs::path dir = model_cache_dir(resolved, cache_dir);
  try {
    fs::create_directories(dir);
    RepoDownload download(options_, resolved, dir);
    download.run(download.list_files());
    std::ofstream(dir / kDownloadCompleteMarker) << source.original << "\n";
  } catch (const fs::filesystem_error& error) {
    throw SourceError("model cache " + dir.string() + ": " + error.what());
  }
  spdlog::info("model source: hf://{}@{} is in {}", resolved.repo, resolved.revision, dir.string());
  return dir;
}

}  // namespace nibble::source

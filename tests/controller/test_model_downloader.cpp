// tests/controller/test_model_downloader.cpp: ModelDownloader against two loopback httplib
// servers laid out like the Hugging Face Hub (api listing + resolve URLs, a redirect to a
// second "CDN" host, Range support, a gated repo, a connection dropped midway).
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "controller/loop/model_resolver.h"
#include "controller/source/hub_files.h"
#include "controller/source/model_downloader.h"
#include "tests/support/temp_dir.h"

namespace nibble::source {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// One listening server on 127.0.0.1 with a random port, stopped on destruction.
class LoopbackServer {
 public:
  LoopbackServer() = default;
  void start() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~LoopbackServer() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  httplib::Server& server() { return server_; }
  std::string origin() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

class FakeHub : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(1234);  // fixed fixture
    weights_.resize(256 * 1024);
    for (char& byte : weights_) byte = static_cast<char>(rng() & 0xFF);
    files_["config.json"] = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64})";
    files_["tokenizer.json"] = R"({"model": {"type": "BPE"}})";
    files_["README.md"] = "not needed for serving";

    httplib::Server& hub = hub_.server();
    hub.Get(R"(/api/models/org/tiny/revision/main)",
            [this](const httplib::Request& req, httplib::Response& res) {
              record(req, "hub");
              res.set_content(R"({"siblings": [
                {"rfilename": "config.json", "size": )" +
                                  std::to_string(files_["config.json"].size()) + R"(},
                {"rfilename": "tokenizer.json"},
                {"rfilename": "README.md"},
                {"rfilename": "model.safetensors", "size": )" +
                                  std::to_string(weights_.size()) + "}]}",
                              "application/json");
            });
    hub.Get(R"(/org/tiny/resolve/main/(.+))",
            [this](const httplib::Request& req, httplib::Response& res) {
              record(req, "hub");
              const std::string name = req.matches[1];
              if (name == "model.safetensors") {  // LFS files live on another host
                res.set_redirect(cdn_.origin() + "/blobs/model.safetensors", 302);
              } else if (files_.count(name)) {
                res.set_content(files_[name], "application/octet-stream");
              } else {
                res.status = 404;
              }
            });
    hub.Get(R"(/api/models/org/gated/revision/main)",
            [](const httplib::Request&, httplib::Response& res) { res.status = 401; });
    hub.Get(R"(/api/models/org/evil/revision/main)", [](const httplib::Request&,
                                                        httplib::Response& res) {
      res.set_content(R"({"siblings": [{"rfilename": "../config.json"}]})", "application/json");
    });
    hub.Get(R"(/api/models/org/missing/revision/main)",
            [](const httplib::Request&, httplib::Response& res) { res.status = 404; });

    cdn_.server().Get(
        "/blobs/model.safetensors", [this](const httplib::Request& req, httplib::Response& res) {
          record(req, "cdn");
          if (drops_left_.fetch_sub(1) > 0) {
            // Sends half of the requested bytes, then closes the connection.
            res.set_content_provider(weights_.size(), "application/octet-stream",
                                     [this](size_t offset, size_t, httplib::DataSink& sink) {
                                       sink.write(weights_.data() + offset, weights_.size() / 2);
                                       return false;
                                     });
            return;
          }
          res.set_content(weights_, "application/octet-stream");
        });
    hub_.start();
    cdn_.start();
  }

  void record(const httplib::Request& req, const std::string& host) {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.push_back(
        {host, req.path, req.get_header_value("Range"), req.get_header_value("Authorization")});
  }

  DownloadOptions options() {
    DownloadOptions options;
    options.endpoint = hub_.origin();
    options.timeout_seconds = 5;
    return options;
  }

  recipe::ModelSource source(const std::string& repo) {
    recipe::ModelSource source;
    source.kind = recipe::ModelSource::Kind::kHuggingFace;
    source.repo = repo;
    source.revision = "main";
    source.original = "hf://" + repo;
    return source;
  }

  std::string error_of(const std::string& repo, DownloadOptions opts) {
    try {
      ModelDownloader(std::move(opts)).download(source(repo), cache_.path());
    } catch (const SourceError& error) {
      return error.what();
    }
    return "no error";
  }

  struct Seen {
    std::string host, path, range, authorization;
  };
  std::mutex mutex_;
  std::vector<Seen> requests_;
  std::map<std::string, std::string> files_;
  std::string weights_;
  std::atomic<int> drops_left_{0};  // weight responses to cut off midway
  LoopbackServer hub_, cdn_;
  nibble::testing::TempDir cache_;
};

TEST_F(FakeHub, DownloadsServingFilesByteIdenticalAndResumesAfterDrop) {
  drops_left_ = 1;
  DownloadOptions opts = options();
  opts.token = "secret";
  std::vector<DownloadProgress> updates;
  opts.on_progress = [&](const DownloadProgress& p) { updates.push_back(p); };

  const fs::path dir = ModelDownloader(opts).download(source("org/tiny"), cache_.path());

  EXPECT_EQ(dir, cache_.path() / "models--org--tiny" / "main");
  EXPECT_EQ(read_file(dir / "config.json"), files_["config.json"]);
  EXPECT_EQ(read_file(dir / "tokenizer.json"), files_["tokenizer.json"]);
  EXPECT_EQ(read_file(dir / "model.safetensors"), weights_);
  EXPECT_FALSE(fs::exists(dir / "README.md"));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.incomplete"));

  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> cdn_ranges;
  for (const Seen& seen : requests_) {
    if (seen.host == "hub") {
      EXPECT_EQ(seen.authorization, "Bearer secret") << seen.path;
    }
    if (seen.host == "cdn") {
      EXPECT_EQ(seen.authorization, "") << "token leaked to the redirect host";
      cdn_ranges.push_back(seen.range);
    }
  }
  ASSERT_EQ(cdn_ranges.size(), 2u);
  EXPECT_EQ(cdn_ranges[0], "");
  EXPECT_EQ(cdn_ranges[1], "bytes=" + std::to_string(weights_.size() / 2) + "-");

  ASSERT_FALSE(updates.empty());
  EXPECT_EQ(updates.back().files_total, 3);
  EXPECT_EQ(updates.back().overall_total, files_["config.json"].size() + weights_.size());
  EXPECT_EQ(updates.back().file_done, weights_.size());
}

TEST_F(FakeHub, ResumesPartialFileLeftByEarlierRunAndSkipsCompleteOnes) {
  const fs::path dir = cache_.path() / "models--org--tiny" / "main";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json", std::ios::binary) << files_["config.json"];
  const size_t kept = 1000;
  std::ofstream(dir / "model.safetensors.incomplete", std::ios::binary) << weights_.substr(0, kept);

  ModelDownloader(options()).download(source("org/tiny"), cache_.path());

  EXPECT_EQ(read_file(dir / "model.safetensors"), weights_);
  std::lock_guard<std::mutex> lock(mutex_);
  bool asked_config = false;
  std::vector<std::string> cdn_ranges;
  for (const Seen& seen : requests_) {
    asked_config |= seen.path.find("config.json") != std::string::npos;
    EXPECT_EQ(seen.authorization, "");  // no token configured
    if (seen.host == "cdn") cdn_ranges.push_back(seen.range);
  }
  EXPECT_FALSE(asked_config) << "a complete file was downloaded again";
  ASSERT_EQ(cdn_ranges.size(), 1u);
  EXPECT_EQ(cdn_ranges[0], "bytes=1000-");
}

TEST_F(FakeHub, GivesUpAfterMaxAttemptsKeepingThePartialFileForTheNextRun) {
  drops_left_ = 1;
  DownloadOptions one_try = options();
  one_try.max_attempts = 1;
  const std::string error = error_of("org/tiny", one_try);
  EXPECT_NE(error.find("giving up on model.safetensors after 1 attempts"), std::string::npos)
      << error;
  const fs::path dir = cache_.path() / "models--org--tiny" / "main";
  EXPECT_EQ(read_file(dir / "model.safetensors.incomplete"),
            weights_.substr(0, weights_.size() / 2));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));

  ModelDownloader(options()).download(source("org/tiny"), cache_.path());
  EXPECT_EQ(read_file(dir / "model.safetensors"), weights_);
  std::lock_guard<std::mutex> lock(mutex_);
  EXPECT_EQ(requests_.back().range, "bytes=" + std::to_string(weights_.size() / 2) + "-");
}

// `nibble pull`, the controller and `nibble-engine serve org/name` share the cache: only a
// finished download is found there (issue 45 item 8).
TEST_F(FakeHub, OnlyAFinishedDownloadIsFoundInTheCache) {
  drops_left_ = 1;
  DownloadOptions one_try = options();
  one_try.max_attempts = 1;
  EXPECT_NE(error_of("org/tiny", one_try), "no error");
  EXPECT_EQ(cached_model_dir(source("org/tiny"), cache_.path()), std::nullopt);
  const fs::path dir = ModelDownloader(options()).download(source("org/tiny"), cache_.path());
  EXPECT_EQ(cached_model_dir(source("org/tiny"), cache_.path()), dir);
  EXPECT_EQ(read_file(dir / kDownloadCompleteMarker), "hf://org/tiny\n");
}

TEST_F(FakeHub, ErrorsSayWhatToDo) {
  EXPECT_NE(error_of("org/gated", options()).find("set HF_TOKEN"), std::string::npos);
  EXPECT_NE(error_of("org/missing", options()).find("no such repo or revision"), std::string::npos);
  EXPECT_NE(error_of("org/evil", options()).find("unsafe file path '../config.json'"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(cache_.path() / "models--org--config.json"));

  DownloadOptions unreachable = options();
  unreachable.endpoint = "http://127.0.0.1:1";
  EXPECT_NE(error_of("org/tiny", unreachable).find("network error"), std::string::npos);
  EXPECT_NE(error_of("not-a-repo", options()).find("must be org/name"), std::string::npos);
}

// The controller's resolver: downloads on a background thread (the pass sees Downloading), then
// serves the cache; a restarted controller finds the completed download without the network.
TEST_F(FakeHub, ResolverDownloadsInTheBackgroundThenUsesTheCacheOffline) {
  using State = controller::ResolvedModel::State;
  auto settle = [](controller::ModelResolver& resolver, const recipe::ModelSource& src) {
    controller::ResolvedModel r = resolver.resolve(src);
    for (int i = 0; i < 200 && r.state == State::kDownloading; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      r = resolver.resolve(src);
    }
    return r;
  };
  controller::ModelResolver resolver(cache_.path(), options());
  const controller::ResolvedModel first = resolver.resolve(source("org/tiny"));
  EXPECT_EQ(first.state, State::kDownloading);
  const controller::ResolvedModel done = settle(resolver, source("org/tiny"));
  ASSERT_EQ(done.state, State::kReady) << done.message;
  EXPECT_EQ(read_file(done.dir / "model.safetensors"), weights_);
  EXPECT_TRUE(fs::exists(done.dir / ".nibble-download-complete"));

  DownloadOptions offline = options();
  offline.endpoint = "http://127.0.0.1:1";  // nothing listens there
  controller::ModelResolver restarted(cache_.path(), offline);
  const controller::ResolvedModel again = restarted.resolve(source("org/tiny"));
  EXPECT_EQ(again.state, State::kReady);
  EXPECT_EQ(again.dir, done.dir);

  // A failed download is reported, and not retried on every pass.
  const controller::ResolvedModel gated = settle(resolver, source("org/gated"));
  EXPECT_EQ(gated.state, State::kFailed);
  EXPECT_NE(gated.message.find("HF_TOKEN"), std::string::npos) << gated.message;
  EXPECT_EQ(resolver.resolve(source("org/gated")).state, State::kFailed);

  recipe::ModelSource path;
  path.path = (cache_.path() / "nowhere").string();
  const controller::ResolvedModel missing = resolver.resolve(path);
  EXPECT_EQ(missing.state, State::kFailed);
  EXPECT_NE(missing.message.find("has no config.json"), std::string::npos);
}

TEST(HubFiles, PathValidationAndServingFilter) {
  EXPECT_TRUE(is_safe_relative_path("model-00001-of-00002.safetensors"));
  EXPECT_TRUE(is_safe_relative_path("sub/dir/file.json"));
  EXPECT_FALSE(is_safe_relative_path("/etc/passwd"));
  EXPECT_FALSE(is_safe_relative_path("a/../../b"));
  EXPECT_FALSE(is_safe_relative_path(".."));
  EXPECT_FALSE(is_safe_relative_path("a//b"));
  EXPECT_FALSE(is_safe_relative_path(""));
  EXPECT_TRUE(is_needed_for_serving("model-00001-of-00002.safetensors"));
  EXPECT_TRUE(is_needed_for_serving("hf_quant_config.json"));
  EXPECT_FALSE(is_needed_for_serving("original/model.safetensors"));
  EXPECT_FALSE(is_needed_for_serving("pytorch_model.bin"));
  EXPECT_EQ(percent_encode("refs/pr/1", false), "refs%2Fpr%2F1");
  EXPECT_EQ(percent_encode("a b/c.json", true), "a%20b/c.json");
}

}  // namespace
}  // namespace nibble::source

namespace nibble::source {
namespace {

TEST(ProgressBar, FormatsOverallBytesAndFiles) {
  DownloadProgress progress;
  progress.file = "model.safetensors";
  progress.file_done = 512;
  progress.file_total = 1024;
  progress.overall_done = 1536;
  progress.overall_total = 3072;
  progress.files_done = 1;
  progress.files_total = 3;
  EXPECT_EQ(format_progress_line(progress, 10),
            "[=====>    ]  50% 1.5 KiB/3.0 KiB  1/3 model.safetensors");
  progress.overall_total = 0;  // listing had no sizes: fall back to the file's bytes
  EXPECT_EQ(format_progress_line(progress, 4), "[==> ]  50% 512 B/1.0 KiB  1/3 model.safetensors");
  EXPECT_EQ(format_bytes(3ull << 30), "3.0 GiB");
}

}  // namespace
}  // namespace nibble::source

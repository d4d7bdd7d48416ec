#pragma once
// A Kubernetes API client on cpp-httplib + OpenSSL: the verbs the controller uses, each one HTTP
// request on its own connection (so one client is safe to share between threads), errors thrown
// as KubeError with the API server's status, reason and message.
//   get, list            GET an object or a collection (with its resourceVersion)
//   watch                GET ?watch=1 streamed as JSON lines (ADDED, MODIFIED, DELETED, BOOKMARK;
//                        an ERROR event is thrown as the KubeError it carries, e.g. 410 Expired)
//   create, replace      POST, PUT (optimistic concurrency: replace sends metadata.resourceVersion)
//   apply                server-side apply: PATCH application/apply-patch+yaml with fieldManager
//                        and force (JSON is YAML, so the body is the object as JSON)
//   merge_patch          PATCH application/merge-patch+json (status and scale subresources)
//   remove               DELETE
// TLS: the CA from the config (or the system store), optional client certificate; a bearer
// token from a file is re-read when the file changes (service-account tokens rotate).
#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "controller/kube/kube_config.h"
#include "controller/kube/kube_error.h"

namespace httplib {
class ClientImpl;
struct Request;
}  // namespace httplib

namespace nibble::kube {

struct KubeClientOptions {
  std::chrono::seconds connect_timeout{10};
  std::chrono::seconds request_timeout{30};  // each non-watch request
  std::string user_agent = "nibble-controller";
  std::string field_manager = "nibble-controller";
};

struct ListResult {
  std::vector<nlohmann::json> items;
  std::string resource_version;  // watch from here
};

struct WatchEvent {
  std::string type;  // ADDED | MODIFIED | DELETED | BOOKMARK
  nlohmann::json object;
};

// Ends a watch that blocks in another thread (closes its connection); the watch then returns
// normally. A cancel before the watch starts makes it return at once. Reusable after reset().
class WatchCancel {
 public:
  void cancel();
  void reset();
  bool cancelled() const;

 private:
  friend class KubeClient;
  bool attach(httplib::ClientImpl* client);  // false when already cancelled
  void detach();
  mutable std::mutex mutex_;
  httplib::ClientImpl* client_ = nullptr;
  bool cancelled_ = false;
};

struct WatchRequest {
  std::string path;  // the collection
  std::string resource_version;
  std::string label_selector;
  int timeout_seconds = 300;  // the server ends the watch after this
  bool bookmarks = true;
  WatchCancel* cancel = nullptr;  // optional
};

class KubeClient {
 public:
  explicit KubeClient(KubeConfig config, KubeClientOptions options = {});
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  const KubeConfig& config() const { return config_; }
  const KubeClientOptions& options() const { return options_; }

  nlohmann::json get(const std::string& path) const;
  ListResult list(const std::string& path, const std::string& label_selector = "") const;
  // Returns when the server ends the stream or on_event returns false; throws KubeError for a
  // failed request, a dropped connection (status 0) or an ERROR event.
  void watch(const WatchRequest& request,
             const std::function<bool(const WatchEvent&)>& on_event) const;
  nlohmann::json create(const std::string& path, const nlohmann::json& object) const;
  nlohmann::json replace(const std::string& path, const nlohmann::json& object) const;
  nlohmann::json apply(const std::string& path, const nlohmann::json& object,
                       bool force = true) const;
  nlohmann::json merge_patch(const std::string& path, const nlohmann::json& patch) const;
  void remove(const std::string& path) const;

 private:
  struct Tls;
  struct Answer {
    int status = 0;
    std::string body;
  };
  Answer send(const std::string& method, const std::string& target, const std::string& body,
              const std::string& content_type) const;
  nlohmann::json send_json(const std::string& method, const std::string& target,
                           const std::string& body, const std::string& content_type) const;
  std::string bearer_token() const;
  std::unique_ptr<httplib::ClientImpl> connect(std::chrono::seconds read_timeout) const;
  httplib::Request new_request(const std::string& method, const std::string& target) const;

  KubeConfig config_;
  KubeClientOptions options_;
  std::string scheme_, host_;
  int port_ = 0;
  std::unique_ptr<Tls> tls_;
  class TokenFile;
  std::unique_ptr<TokenFile> token_file_;
};

}  // namespace nibble::kube

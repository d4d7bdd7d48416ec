#include "controller/kube/kube_client.h"

#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

#include "controller/kube/resource_path.h"

namespace nibble::kube {

namespace {

using Json = nlohmann::json;

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

BioPtr pem_bio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

std::vector<std::unique_ptr<X509, X509Free>> parse_certificates(const std::string& pem,
                                                                const std::string& what) {
  std::vector<std::unique_ptr<X509, X509Free>> certs;
  BioPtr bio = pem_bio(pem);
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  if (certs.empty()) throw KubeConfigError(what + ": no PEM certificate found");
  return certs;
}

std::string read_token(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  return token;
}

}  // namespace

// Certificates parsed once; each request's SSL context takes references to them.
struct KubeClient::Tls {
  std::vector<std::unique_ptr<X509, X509Free>> ca;
  std::unique_ptr<X509, X509Free> client_cert;
  std::unique_ptr<EVP_PKEY, KeyFree> client_key;
};

// Service-account tokens are rotated by the kubelet (hourly); the file is re-read when its
// modification time changes, and at least every minute as client-go does.
class KubeClient::TokenFile {
 public:
  explicit TokenFile(std::string path) : path_(std::move(path)) {}
  std::string token() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::error_code ec;
    const auto mtime = std::filesystem::last_write_time(path_, ec);
    const auto now = std::chrono::steady_clock::now();
    if (token_.empty() || ec || mtime != mtime_ || now - read_at_ > std::chrono::minutes(1)) {
      const std::string fresh = read_token(path_);
      if (!fresh.empty()) token_ = fresh;  // keep the last good token through a rotation
      mtime_ = mtime;
      read_at_ = now;
    }
    return token_;
  }

 private:
  std::string path_;
  std::mutex mutex_;
  std::string token_;
  std::filesystem::file_time_type mtime_{};
  std::chrono::steady_clock::time_point read_at_{};
};

void WatchCancel::cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_ = true;
  if (client_ != nullptr) client_->stop();
}

void WatchCancel::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_ = false;
}

bool WatchCancel::cancelled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancelled_;
}

bool WatchCancel::attach(httplib::ClientImpl* client) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cancelled_) return false;
  client_ = client;
  return true;
}

void WatchCancel::detach() {
  std::lock_guard<std::mutex> lock(mutex_);
  client_ = nullptr;
}

KubeClient::KubeClient(KubeConfig config, KubeClientOptions options)
    : config_(std::move(config)), options_(std::move(options)) {
  const size_t scheme_end = config_.server.find("://");
  if (scheme_end == std::string::npos) {
    throw KubeConfigError("server '" + config_.server + "': expected https://host[:port]");
  }
  scheme_ = config_.server.substr(0, scheme_end);
  std::string authority = config_.server.substr(scheme_end + 3);
  authority = authority.substr(0, authority.find('/'));
  port_ = scheme_ == "https" ? 443 : 80;
  size_t colon = authority.rfind(':');
  if (!authority.empty() && authority.front() == '[') {  // [ipv6]:port
    const size_t close = authority.find(']');
    host_ = authority.substr(1, close - 1);
    colon = authority.find(':', close);
  } else {
    host_ = authority.substr(0, colon);
  }
  if (colon != std::string::npos) {
    try {
      port_ = std::stoi(authority.substr(colon + 1));
    } catch (const std::exception&) {
      throw KubeConfigError("server '" + config_.server + "': bad port");
    }
  }
  if (host_.empty()) throw KubeConfigError("server '" + config_.server + "': no host");
  if (scheme_ != "https" && scheme_ != "http") {
    throw KubeConfigError("server '" + config_.server + "': expected https:// or http://");
  }
  if (scheme_ == "https") {
    tls_ = std::make_unique<Tls>();
    if (!config_.ca_pem.empty()) tls_->ca = parse_certificates(config_.ca_pem, "CA");
    if (!config_.client_cert_pem.empty()) {
      tls_->client_cert =
          std::move(parse_certificates(config_.client_cert_pem, "client-certificate").front());
      BioPtr bio = pem_bio(config_.client_key_pem);
      tls_->client_key.reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
      if (!tls_->client_key) throw KubeConfigError("client-key: no PEM private key found");
    }
  }
  if (!config_.token_file.empty()) token_file_ = std::make_unique<TokenFile>(config_.token_file);
}

KubeClient::~KubeClient() = default;

std::string KubeClient::bearer_token() const {
  if (token_file_) return token_file_->token();
  return config_.token;
}

std::unique_ptr<httplib::ClientImpl> KubeClient::connect(std::chrono::seconds read_timeout) const {
  std::unique_ptr<httplib::ClientImpl> client;
  if (tls_) {
    auto ssl = tls_->client_cert
                   ? std::make_unique<httplib::SSLClient>(host_, port_, tls_->client_cert.get(),
                                                          tls_->client_key.get())
                   : std::make_unique<httplib::SSLClient>(host_, port_);
    if (!tls_->ca.empty()) {
      X509_STORE* store = X509_STORE_new();
      for (const auto& cert : tls_->ca) X509_STORE_add_cert(store, cert.get());
      ssl->set_ca_cert_store(store);  // the SSL context owns the store
    }
    ssl->enable_server_certificate_verification(!config_.insecure_skip_tls_verify);
    client = std::move(ssl);
  } else {
    client = std::make_unique<httplib::ClientImpl>(host_, port_);
  }
  client->set_connection_timeout(options_.connect_timeout);
  client->set_read_timeout(read_timeout);
  client->set_write_timeout(options_.request_timeout);
  return client;
}

httplib::Request KubeClient::new_request(const std::string& method,
                                         const std::string& target) const {
  httplib::Request req;
  req.method = method;
  req.path = target;
  req.headers.emplace("Accept", "application/json");
  req.headers.emplace("User-Agent", options_.user_agent);
  const std::string token = bearer_token();
  if (!token.empty()) req.headers.emplace("Authorization", "Bearer " + token);
  return req;
}

KubeClient::Answer KubeClient::send(const std::string& method, const std::string& target,
                                    const std::string& body,
                                    const std::string& content_type) const {
  auto client = connect(options_.request_timeout);
  httplib::Request req = new_request(method, target);
  if (!body.empty()) {
    req.headers.emplace("Content-Type", content_type);
    req.body = body;
  }
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  if (!client->send(req, res, error)) {
    throw KubeError(0, "Transport",
                    method + " " + config_.server + target + ": " + httplib::to_string(error));
  }
  return {res.status, std::move(res.body)};
}

Json KubeClient::send_json(const std::string& method, const std::string& target,
                           const std::string& body, const std::string& content_type) const {
  const Answer answer = send(method, target, body, content_type);
  if (answer.status < 200 || answer.status >= 300) {
    throw error_from_response(answer.status, method, target, answer.body);
  }
  Json parsed = Json::parse(answer.body, nullptr, false);
  if (parsed.is_discarded()) {
    throw KubeError(answer.status, "InvalidResponse", method + " " + target + ": not JSON");
  }
  return parsed;
}

Json KubeClient::get(const std::string& path) const {
  return send_json("GET", path, "", "");
}

ListResult KubeClient::list(const std::string& path, const std::string& label_selector) const {
  const std::string target =
      label_selector.empty() ? path : path + "?labelSelector=" + query_escape(label_selector);
  Json answer = send_json("GET", target, "", "");
  ListResult result;
  if (answer.contains("metadata")) {
    result.resource_version = answer["metadata"].value("resourceVersion", "");
  }
  if (answer.contains("items") && answer["items"].is_array()) {
    for (Json& item : answer["items"]) result.items.push_back(std::move(item));
  }
  return result;
}

Json KubeClient::create(const std::string& path, const Json& object) const {
  return send_json("POST", path, object.dump(), "application/json");
}

Json KubeClient::replace(const std::string& path, const Json& object) const {
  return send_json("PUT", path, object.dump(), "application/json");
}

Json KubeClient::apply(const std::string& path, const Json& object, bool force) const {
  const std::string target =
      path + "?fieldManager=" + query_escape(options_.field_manager) + (force ? "&force=true" : "");
  return send_json("PATCH", target, object.dump(), "application/apply-patch+yaml");
}

Json KubeClient::merge_patch(const std::string& path, const Json& patch) const {
  return send_json("PATCH", path, patch.dump(), "application/merge-patch+json");
}

void KubeClient::remove(const std::string& path) const {
  send_json("DELETE", path, "", "");
}

void KubeClient::watch(const WatchRequest& request,
                       const std::function<bool(const WatchEvent&)>& on_event) const {
  std::string target =
      request.path + "?watch=1&timeoutSeconds=" + std::to_string(request.timeout_seconds);
  if (request.bookmarks) target += "&allowWatchBookmarks=true";
  if (!request.resource_version.empty()) {
    target += "&resourceVersion=" + query_escape(request.resource_version);
  }
  if (!request.label_selector.empty()) {
    target += "&labelSelector=" + query_escape(request.label_selector);
  }

  // Bookmarks and events may be minutes apart; the server ends the stream at timeoutSeconds.
  auto client = connect(std::chrono::seconds(request.timeout_seconds + 30));
  httplib::Request req = new_request("GET", target);

  int status = 0;
  std::string pending, error_body;
  bool stopped = false;
  std::optional<KubeError> stream_error;
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (status != 200) {
      error_body.append(data, size);
      return error_body.size() < 64 * 1024;
    }
    pending.append(data, size);
    for (size_t newline; (newline = pending.find('\n')) != std::string::npos;) {
      const std::string line = pending.substr(0, newline);
      pending.erase(0, newline + 1);
      if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
      Json event = Json::parse(line, nullptr, false);
      if (event.is_discarded() || !event.is_object()) {
        stream_error = KubeError(0, "InvalidResponse", "watch " + request.path + ": not JSON");
        return false;
      }
      WatchEvent parsed{event.value("type", ""), std::move(event["object"])};
      if (parsed.type == "ERROR") {
        stream_error = error_from_status(parsed.object);
        return false;
      }
      if (!on_event(parsed)) {
        stopped = true;
        return false;
      }
    }
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  if (request.cancel != nullptr && !request.cancel->attach(client.get())) return;
  const bool ok = client->send(req, res, error);
  if (request.cancel != nullptr) {
    request.cancel->detach();
    if (request.cancel->cancelled()) return;
  }
  if (stream_error) throw *stream_error;
  if (stopped) return;
  if (status != 0 && status != 200) {
    throw error_from_response(status, "GET", target, error_body);
  }
  if (!ok) {
    throw KubeError(0, "Transport",
                    "watch " + config_.server + request.path + ": " + httplib::to_string(error));
  }
}

}  // namespace nibble::kube

#pragma once
// An API-server test double: an httplib server on 127.0.0.1 (plain HTTP, or HTTPS with a given
// certificate) implementing the part of the Kubernetes API the controller uses:
//   - get, create, replace (PUT with resourceVersion: 409 Conflict when stale), delete with
//     owner-reference garbage collection (immediate, cascading; an object applied with an
//     owner that no longer exists is collected at once too);
//   - list (one global resourceVersion, label selectors k=v / k!=v / k), all-namespace lists;
//   - watch (JSON lines) from a resourceVersion, bookmarks at a set interval, timeoutSeconds,
//     410 Expired (an ERROR event) for a version older than the last compaction;
//   - server-side apply (PATCH application/apply-patch+yaml, JSON body) with field ownership
//     simplified to top-level spec fields, labels, annotations and owner references per manager:
//     a field another manager owns is a 409 unless force=true; fields the manager stops applying
//     are removed; metadata.generation bumps when spec changes;
//   - merge patch; status and scale subresources (status writes ignore spec and vice versa);
//     the scale subresource maps spec.replicas, status.replicas and the selector as a
//     Deployment does, or through a custom resource's paths (set_scale_paths);
//   - Leases and Events as ordinary objects.
// Fault injection: answer the next N matching requests with a status, drop every open watch,
// compact (open watches get 410 and resuming from an older version too), delay every answer.
// Not modelled: admission, validation against schemas, defaulting, strategic merge patch,
// field-level managedFields, finalizers, the controllers of kube-controller-manager (tests play
// the Deployment controller and kubelet by writing status and pods themselves).
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace nibble::kube::testing {

struct TlsFiles {  // PEM files for an HTTPS double
  std::string cert, key;
  std::string client_ca;  // when set, clients must present a certificate signed by it
};

class FakeApiServer {
 public:
  explicit FakeApiServer(std::optional<TlsFiles> tls = std::nullopt);
  ~FakeApiServer();
  void start();
  void stop();
  std::string url() const;  // http(s)://127.0.0.1:port
  int port() const { return port_; }

  // Direct access for tests, as an API server's other clients would act (no faults applied).
  // `type` is a collection path without namespace, e.g. "/apis/apps/v1/deployments".
  nlohmann::json put_object(const std::string& type, nlohmann::json object);
  std::optional<nlohmann::json> object(const std::string& type, const std::string& ns,
                                       const std::string& name) const;
  std::vector<nlohmann::json> objects(const std::string& type, const std::string& ns) const;
  bool delete_object(const std::string& type, const std::string& ns, const std::string& name);
  std::int64_t resource_version() const;

  // A custom resource's scale subresource (a CRD's subresources.scale), as JSON pointers:
  // specReplicasPath ".spec.replicas.desired" is "/spec/replicas/desired". Without one, a type's
  // scale is a Deployment's (spec.replicas, status.replicas, spec.selector.matchLabels).
  struct ScalePaths {
    std::string spec_replicas, status_replicas, label_selector;
  };
  void set_scale_paths(const std::string& type, ScalePaths paths);

  // Faults.
  // The next `count` requests with this method whose path contains path_part (and, when
  // user_agent is set, from that client) are answered with `status` and a Status body.
  void fail_next(const std::string& method, const std::string& path_part, int status, int count = 1,
                 const std::string& user_agent = "");
  void clear_faults();
  void drop_watches();
  void compact();  // open watches get 410 Expired; older versions cannot be resumed
  void set_latency(std::chrono::milliseconds latency) { latency_ = latency; }
  void set_bookmark_interval(std::chrono::milliseconds interval) { bookmark_interval_ = interval; }

  // Requests seen: method and path (query string stripped) containing path_part, from clients
  // with this User-Agent when one is given.
  int count_requests(const std::string& method, const std::string& path_part,
                     const std::string& user_agent = "") const;
  int open_watches() const { return open_watches_.load(); }

  // RBAC as a real API server authorizes: each request is an access (API group, resource or
  // resource/subresource, verb: get list watch create update patch delete deletecollection); a
  // server-side apply that creates the object needs create as well as patch. With an authorizer
  // set, a request needing an access it refuses is answered 403 Forbidden. Every access asked
  // for, refused or not, is recorded with the client's User-Agent.
  // `name`: the object a request on one object names (get, update, patch, delete), which RBAC
  // rules with resourceNames match; "" for collections and creates.
  struct Access {
    std::string group, resource, verb, name;
    auto operator<=>(const Access&) const = default;
  };
  using Authorizer = std::function<bool(const Access&, const std::string& user_agent)>;
  void set_authorizer(Authorizer allowed);
  std::set<Access> accesses(const std::string& user_agent = "") const;  // "": every client's

  struct Route;  // a parsed request path

 private:
  struct Event {
    std::int64_t rv;
    std::string type_key, ns, type;
    nlohmann::json object;
  };
  struct Fault {
    std::string method, path_part;
    int status, remaining;
    std::string user_agent;
  };
  void handle(const httplib::Request& req, httplib::Response& res);
  void serve_watch(const Route& route, const httplib::Request& req, httplib::Response& res);
  nlohmann::json store_locked(const std::string& type_key, nlohmann::json object,
                              const std::string& event_type);
  bool owner_missing_locked(const nlohmann::json& object) const;
  void erase_locked(const std::string& type_key, const std::string& ns, const std::string& name);
  nlohmann::json scale_of(const std::string& type_key, const nlohmann::json& object) const;
  void write_scale(const std::string& type_key, nlohmann::json& object, int replicas) const;
  void respond_apply(const Route& route, const httplib::Request& req, httplib::Response& res);
  std::vector<Access> accesses_locked(const Route& route, const httplib::Request& req) const;

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  bool https_ = false;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  // type key → "ns/name" → object
  std::map<std::string, std::map<std::string, nlohmann::json>> objects_;
  // type key → "ns/name" → manager → owned top-level fields
  std::map<std::string, std::map<std::string, std::map<std::string, std::set<std::string>>>>
      owners_;
  std::vector<Event> events_;
  std::int64_t rv_ = 1;
  std::int64_t compacted_rv_ = 0;
  std::int64_t watch_epoch_ = 0;    // bumped by drop_watches
  std::int64_t compact_epoch_ = 0;  // bumped by compact
  std::int64_t uid_counter_ = 0;
  std::vector<Fault> faults_;
  struct Seen {
    std::string method, path, user_agent;
  };
  std::vector<Seen> requests_;
  Authorizer authorizer_;
  std::map<std::string, ScalePaths> scale_paths_;      // by type key
  std::set<std::pair<std::string, Access>> accesses_;  // (User-Agent, access)
  std::atomic<std::chrono::milliseconds> latency_{std::chrono::milliseconds(0)};
  std::atomic<std::chrono::milliseconds> bookmark_interval_{std::chrono::milliseconds(200)};
  std::atomic<int> open_watches_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace nibble::kube::testing

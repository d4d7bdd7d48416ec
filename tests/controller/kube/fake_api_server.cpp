#include "tests/controller/kube/fake_api_server.h"

#include <sstream>

namespace nibble::kube::testing {

using Json = nlohmann::json;

struct FakeApiServer::Route {
  std::string type_key;  // "/api/v1/pods", "/apis/apps/v1/deployments"
  std::string ns;        // "" across namespaces
  std::string name;      // "" for the collection
  std::string subresource;
};

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

std::optional<FakeApiServer::Route> parse_route(const std::string& path);

Json status_body(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", Json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", reason},
          {"code", code}};
}

void reply(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void fail(httplib::Response& res, int code, const std::string& reason, const std::string& msg) {
  reply(res, code, status_body(code, reason, msg));
}

std::string key(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

const Json& meta(const Json& object) {
  static const Json empty = Json::object();
  return object.contains("metadata") && object["metadata"].is_object() ? object["metadata"] : empty;
}

// k=v, k==v, k!=v and bare k (exists), comma-separated; all must hold.
bool labels_match(const Json& object, const std::string& selector) {
  const Json labels = meta(object).value("labels", Json::object());
  for (const std::string& term : split(selector, ',')) {
    const size_t ne = term.find("!=");
    const size_t eq = term.find('=');
    if (ne != std::string::npos) {
      const std::string k = term.substr(0, ne), v = term.substr(ne + 2);
      if (labels.contains(k) && labels[k] == v) return false;
    } else if (eq != std::string::npos) {
      const std::string k = term.substr(0, eq);
      const std::string v = term.substr(term[eq + 1] == '=' ? eq + 2 : eq + 1);
      if (!labels.contains(k) || labels[k] != v) return false;
    } else if (!labels.contains(term)) {
      return false;
    }
  }
  return true;
}

// The fields server-side apply tracks, simplified to top-level ones.
std::set<std::string> applied_fields(const Json& object) {
  std::set<std::string> fields;
  for (const auto& [k, v] : object.items()) {
    if (k == "apiVersion" || k == "kind" || k == "metadata" || k == "status") continue;
    if (k == "spec" && v.is_object()) {
      for (const auto& [sk, sv] : v.items()) fields.insert("spec." + sk);
    } else {
      fields.insert(k);
    }
  }
  const Json& m = meta(object);
  for (const char* group : {"labels", "annotations"}) {
    if (m.contains(group) && m[group].is_object()) {
      for (const auto& [lk, lv] : m[group].items()) fields.insert(std::string(group) + "." + lk);
    }
  }
  if (m.contains("ownerReferences")) fields.insert("ownerReferences");
  return fields;
}

// The value at a tracked field (null when absent).
Json field_value(const Json& object, const std::string& field) {
  const size_t dot = field.find('.');
  if (dot == std::string::npos) {
    if (field == "ownerReferences") return meta(object).value("ownerReferences", Json());
    return object.value(field, Json());
  }
  const std::string head = field.substr(0, dot), rest = field.substr(dot + 1);
  const Json& parent = head == "spec" ? object.value("spec", Json::object())
                                      : meta(object).value(head, Json::object());
  return parent.is_object() && parent.contains(rest) ? parent[rest] : Json();
}

void set_field(Json& object, const std::string& field, const Json& value) {
  const size_t dot = field.find('.');
  Json* parent = nullptr;
  std::string leaf = field;
  if (dot == std::string::npos) {
    parent = field == "ownerReferences" ? &object["metadata"] : &object;
  } else {
    const std::string head = field.substr(0, dot);
    leaf = field.substr(dot + 1);
    parent = head == "spec" ? &object["spec"] : &object["metadata"][head];
  }
  if (value.is_null()) {
    if (parent->is_object()) parent->erase(leaf);
  } else {
    (*parent)[leaf] = value;
  }
}

std::optional<FakeApiServer::Route> parse_route(const std::string& path) {
  const std::vector<std::string> seg = split(path, '/');
  FakeApiServer::Route route;
  size_t i = 0;
  if (seg.size() >= 3 && seg[0] == "api") {
    route.type_key = "/api/" + seg[1];
    i = 2;
  } else if (seg.size() >= 4 && seg[0] == "apis") {
    route.type_key = "/apis/" + seg[1] + "/" + seg[2];
    i = 3;
  } else {
    return std::nullopt;
  }
  if (seg[i] == "namespaces" && seg.size() >= i + 3) {
    route.ns = seg[i + 1];
    i += 2;
  }
  route.type_key += "/" + seg[i];
  if (seg.size() > i + 1) route.name = seg[i + 1];
  if (seg.size() > i + 2) route.subresource = seg[i + 2];
  if (seg.size() > i + 3) return std::nullopt;
  return route;
}

std::string now_rfc3339() {
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

}  // namespace

FakeApiServer::FakeApiServer(std::optional<TlsFiles> tls) {
  if (tls) {
    https_ = true;
    server_ = tls->client_ca.empty()
                  ? std::make_unique<httplib::SSLServer>(tls->cert.c_str(), tls->key.c_str())
                  : std::make_unique<httplib::SSLServer>(tls->cert.c_str(), tls->key.c_str(),
                                                         tls->client_ca.c_str());
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  // Watches hold a thread each; two controllers with a few informers each need more than the
  // default pool.
  server_->new_task_queue = [] { return new httplib::ThreadPool(48); };
  auto handler = [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); };
  server_->Get(".*", handler);
  server_->Post(".*", handler);
  server_->Put(".*", handler);
  server_->Patch(".*", handler);
  server_->Delete(".*", handler);
}

FakeApiServer::~FakeApiServer() {
  stop();
}

void FakeApiServer::start() {
  port_ = server_->bind_to_any_port("127.0.0.1");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void FakeApiServer::stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  changed_.notify_all();
  server_->stop();
  thread_.join();
}

std::string FakeApiServer::url() const {
  return std::string(https_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
}

std::int64_t FakeApiServer::resource_version() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return rv_;
}

Json FakeApiServer::store_locked(const std::string& type_key, Json object,
                                 const std::string& event_type) {
  Json& m = object["metadata"];
  m["resourceVersion"] = std::to_string(++rv_);
  if (!m.contains("uid")) m["uid"] = "uid-" + std::to_string(++uid_counter_);
  if (!m.contains("creationTimestamp")) m["creationTimestamp"] = now_rfc3339();
  if (!m.contains("generation")) m["generation"] = 1;
  const std::string ns = m.value("namespace", "");
  objects_[type_key][key(ns, m.value("name", ""))] = object;
  events_.push_back({rv_, type_key, ns, event_type, object});
  changed_.notify_all();
  return object;
}

void FakeApiServer::erase_locked(const std::string& type_key, const std::string& ns,
                                 const std::string& name) {
  auto& bucket = objects_[type_key];
  const auto it = bucket.find(key(ns, name));
  if (it == bucket.end()) return;
  Json object = it->second;
  bucket.erase(it);
  owners_[type_key].erase(key(ns, name));
  object["metadata"]["resourceVersion"] = std::to_string(++rv_);
  events_.push_back({rv_, type_key, ns, "DELETED", object});
  changed_.notify_all();
  // Garbage collection: dependents whose owner references name this uid go too.
  const Json uid = meta(object).value("uid", Json());
  std::vector<std::tuple<std::string, std::string, std::string>> dependents;
  for (const auto& [other_type, others] : objects_) {
    for (const auto& [other_key, other] : others) {
      for (const Json& ref : meta(other).value("ownerReferences", Json::array())) {
        if (ref.value("uid", Json()) == uid) {
          dependents.emplace_back(other_type, meta(other).value("namespace", ""),
                                  meta(other).value("name", ""));
        }
      }
    }
  }
  for (const auto& [t, n, nm] : dependents) erase_locked(t, n, nm);
}

bool FakeApiServer::owner_missing_locked(const Json& object) const {
  for (const Json& ref : meta(object).value("ownerReferences", Json::array())) {
    bool found = false;
    for (const auto& [type, bucket] : objects_) {
      for (const auto& [k, other] : bucket) found |= meta(other).value("uid", Json()) == ref["uid"];
    }
    if (!found) return true;
  }
  return false;
}

Json FakeApiServer::put_object(const std::string& type, Json object) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool exists = objects_[type].count(key(meta(object).value("namespace", ""),
                                               meta(object).value("name", ""))) > 0;
  return store_locked(type, std::move(object), exists ? "MODIFIED" : "ADDED");
}

std::optional<Json> FakeApiServer::object(const std::string& type, const std::string& ns,
                                          const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto t = objects_.find(type);
  if (t == objects_.end()) return std::nullopt;
  const auto it = t->second.find(key(ns, name));
  if (it == t->second.end()) return std::nullopt;
  return it->second;
}

std::vector<Json> FakeApiServer::objects(const std::string& type, const std::string& ns) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Json> out;
  const auto t = objects_.find(type);
  if (t == objects_.end()) return out;
  for (const auto& [k, object] : t->second) {
    if (ns.empty() || meta(object).value("namespace", "") == ns) out.push_back(object);
  }
  return out;
}

bool FakeApiServer::delete_object(const std::string& type, const std::string& ns,
                                  const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (objects_[type].count(key(ns, name)) == 0) return false;
  erase_locked(type, ns, name);
  return true;
}

void FakeApiServer::fail_next(const std::string& method, const std::string& path_part, int status,
                              int count, const std::string& user_agent) {
  std::lock_guard<std::mutex> lock(mutex_);
  faults_.push_back({method, path_part, status, count, user_agent});
}

void FakeApiServer::clear_faults() {
  std::lock_guard<std::mutex> lock(mutex_);
  faults_.clear();
}

void FakeApiServer::drop_watches() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++watch_epoch_;
  changed_.notify_all();
}

void FakeApiServer::compact() {
  std::lock_guard<std::mutex> lock(mutex_);
  compacted_rv_ = rv_;
  ++compact_epoch_;
  changed_.notify_all();
}

int FakeApiServer::count_requests(const std::string& method, const std::string& path_part,
                                  const std::string& user_agent) const {
  std::lock_guard<std::mutex> lock(mutex_);
  int n = 0;
  for (const Seen& r : requests_) {
    if (r.method == method && r.path.find(path_part) != std::string::npos &&
        (user_agent.empty() || r.user_agent == user_agent)) {
      ++n;
    }
  }
  return n;
}

void FakeApiServer::set_scale_paths(const std::string& type, ScalePaths paths) {
  std::lock_guard<std::mutex> lock(mutex_);
  scale_paths_[type] = std::move(paths);
}

Json FakeApiServer::scale_of(const std::string& type_key, const Json& object) const {
  const Json& m = meta(object);
  int spec_replicas = 0, status_replicas = 0;
  std::string selector_text;
  const auto custom = scale_paths_.find(type_key);
  if (custom != scale_paths_.end()) {
    const Json::json_pointer spec_path(custom->second.spec_replicas);
    const Json::json_pointer status_path(custom->second.status_replicas);
    const Json::json_pointer selector_path(custom->second.label_selector);
    if (object.contains(spec_path)) spec_replicas = object.at(spec_path).get<int>();
    if (object.contains(status_path)) status_replicas = object.at(status_path).get<int>();
    if (object.contains(selector_path)) selector_text = object.at(selector_path).get<std::string>();
  } else {
    Json selector = Json::object();
    if (object.contains("spec") && object["spec"].contains("selector")) {
      selector = object["spec"]["selector"];
    }
    const Json match_labels = selector.value("matchLabels", Json::object());
    for (const auto& [k, v] : match_labels.items()) {
      selector_text += (selector_text.empty() ? "" : ",") + k + "=" + v.get<std::string>();
    }
    spec_replicas = object.value("spec", Json::object()).value("replicas", 0);
    status_replicas = object.value("status", Json::object()).value("replicas", 0);
  }
  return {{"apiVersion", "autoscaling/v1"},
          {"kind", "Scale"},
          {"metadata",
           {{"name", m.value("name", "")},
            {"namespace", m.value("namespace", "")},
            {"resourceVersion", m.value("resourceVersion", "")}}},
          {"spec", {{"replicas", spec_replicas}}},
          {"status", {{"replicas", status_replicas}, {"selector", selector_text}}}};
}

void FakeApiServer::write_scale(const std::string& type_key, Json& object, int replicas) const {
  const auto custom = scale_paths_.find(type_key);
  object[Json::json_pointer(
      custom == scale_paths_.end() ? "/spec/replicas" : custom->second.spec_replicas)] = replicas;
}

void FakeApiServer::set_authorizer(Authorizer allowed) {
  std::lock_guard<std::mutex> lock(mutex_);
  authorizer_ = std::move(allowed);
}

std::set<FakeApiServer::Access> FakeApiServer::accesses(const std::string& user_agent) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::set<Access> out;
  for (const auto& [agent, access] : accesses_)
    if (user_agent.empty() || agent == user_agent) out.insert(access);
  return out;
}

void FakeApiServer::handle(const httplib::Request& req, httplib::Response& res) {
  const auto latency = latency_.load();
  if (latency.count() > 0) std::this_thread::sleep_for(latency);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.push_back({req.method, req.path, req.get_header_value("User-Agent")});
    if (const std::optional<Route> route = parse_route(req.path)) {
      const std::vector<Access> needed = accesses_locked(*route, req);
      bool allowed = true;
      const std::string agent = req.get_header_value("User-Agent");
      for (const Access& a : needed) {
        accesses_.insert({agent, a});
        if (authorizer_ && !authorizer_(a, agent)) {
          allowed = false;
          fail(res, 403, "Forbidden",
               a.resource + (a.group.empty() ? "" : "." + a.group) + " is forbidden: cannot " +
                   a.verb);
        }
      }
      if (!allowed) return;
    }
    for (Fault& f : faults_) {
      if (f.remaining > 0 && f.method == req.method &&
          req.path.find(f.path_part) != std::string::npos &&
          (f.user_agent.empty() || req.get_header_value("User-Agent") == f.user_agent)) {
        --f.remaining;
        const std::string reason = f.status == 409   ? "Conflict"
                                   : f.status == 410 ? "Expired"
                                   : f.status == 404 ? "NotFound"
                                                     : "InternalError";
        fail(res, f.status, reason, "injected fault");
        return;
      }
    }
  }
  const std::optional<Route> route = parse_route(req.path);
  if (!route) {
    fail(res, 404, "NotFound", "the server could not find the requested resource");
    return;
  }
  if (req.method == "GET" && route->name.empty() && req.get_param_value("watch") == "1") {
    serve_watch(*route, req, res);
    return;
  }
  if (req.method == "PATCH" &&
      req.get_header_value("Content-Type") == "application/apply-patch+yaml") {
    respond_apply(*route, req, res);
    return;
  }

  std::unique_lock<std::mutex> lock(mutex_);
  auto& bucket = objects_[route->type_key];
  const std::string object_key = key(route->ns, route->name);
  const auto found = route->name.empty() ? bucket.end() : bucket.find(object_key);
  const std::string what = route->type_key + " \"" + route->name + "\"";

  if (req.method == "GET" && route->name.empty()) {
    Json items = Json::array();
    const std::string selector = req.get_param_value("labelSelector");
    for (const auto& [k, object] : bucket) {
      if (!route->ns.empty() && meta(object).value("namespace", "") != route->ns) continue;
      if (!selector.empty() && !labels_match(object, selector)) continue;
      items.push_back(object);
    }
    reply(res, 200,
          {{"kind", "List"},
           {"apiVersion", "v1"},
           {"metadata", {{"resourceVersion", std::to_string(rv_)}}},
           {"items", items}});
    return;
  }
  if (req.method == "POST") {
    Json object = Json::parse(req.body, nullptr, false);
    if (!object.is_object()) return fail(res, 400, "BadRequest", "body is not a JSON object");
    Json& m = object["metadata"];
    if (!route->ns.empty()) m["namespace"] = route->ns;
    if (!m.contains("name") && m.contains("generateName")) {
      m["name"] = m["generateName"].get<std::string>() + std::to_string(++uid_counter_);
    }
    const std::string name = m.value("name", "");
    if (name.empty()) return fail(res, 422, "Invalid", "metadata.name: Required value");
    if (bucket.count(key(route->ns, name)) > 0) {
      return fail(res, 409, "AlreadyExists", route->type_key + " \"" + name + "\" already exists");
    }
    m.erase("resourceVersion");
    m["generation"] = 1;
    reply(res, 201, store_locked(route->type_key, std::move(object), "ADDED"));
    return;
  }
  if (found == bucket.end()) return fail(res, 404, "NotFound", what + " not found");
  Json current = found->second;
  const std::string current_rv = meta(current).value("resourceVersion", "");

  if (req.method == "GET") {
    reply(res, 200, route->subresource == "scale" ? scale_of(route->type_key, current) : current);
    return;
  }
  if (req.method == "DELETE") {
    erase_locked(route->type_key, route->ns, route->name);
    reply(res, 200, {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Success"}});
    return;
  }
  const Json body = Json::parse(req.body, nullptr, false);
  if (!body.is_object()) return fail(res, 400, "BadRequest", "body is not a JSON object");
  Json next = current;
  if (req.method == "PUT") {
    const std::string sent_rv = meta(body).value("resourceVersion", "");
    if (!sent_rv.empty() && sent_rv != current_rv) {
      return fail(res, 409, "Conflict",
                  "Operation cannot be fulfilled on " + what +
                      ": the object has been modified; please apply your changes to the latest "
                      "version and try again");
    }
    if (route->subresource == "status") {
      next["status"] = body.value("status", Json::object());
    } else if (route->subresource == "scale") {
      write_scale(route->type_key, next, body.value("spec", Json::object()).value("replicas", 0));
    } else {
      next = body;
      next["metadata"]["uid"] = meta(current)["uid"];
      next["metadata"]["creationTimestamp"] = meta(current)["creationTimestamp"];
      next["metadata"]["generation"] = meta(current).value("generation", 1);
      if (current.contains("status")) next["status"] = current["status"];
    }
  } else if (req.method == "PATCH") {  // merge patch
    if (route->subresource == "scale") {
      write_scale(route->type_key, next, body.value("spec", Json::object()).value("replicas", 0));
    } else {
      Json merged = current;
      merged.merge_patch(body);
      if (route->subresource == "status") {
        next["status"] = merged.value("status", Json::object());
      } else {
        next = merged;
        if (current.contains("status")) next["status"] = current["status"];
      }
    }
  } else {
    return fail(res, 405, "MethodNotAllowed", req.method + " is not supported");
  }
  if (next.value("spec", Json()) != current.value("spec", Json())) {
    next["metadata"]["generation"] = meta(current).value("generation", 1) + 1;
  }
  Json stored = store_locked(route->type_key, std::move(next), "MODIFIED");
  reply(res, 200, route->subresource == "scale" ? scale_of(route->type_key, stored) : stored);
}

std::vector<FakeApiServer::Access> FakeApiServer::accesses_locked(
    const Route& route, const httplib::Request& req) const {
  const std::vector<std::string> seg = split(route.type_key, '/');
  Access a;
  a.group = seg[0] == "api" ? "" : seg[1];
  a.resource = seg.back() + (route.subresource.empty() ? "" : "/" + route.subresource);
  if (req.method == "GET") {
    a.verb = !route.name.empty() ? "get" : req.get_param_value("watch") == "1" ? "watch" : "list";
  } else if (req.method == "POST") {
    a.verb = "create";
  } else if (req.method == "PUT") {
    a.verb = "update";
  } else if (req.method == "PATCH") {
    a.verb = "patch";
  } else if (req.method == "DELETE") {
    a.verb = route.name.empty() ? "deletecollection" : "delete";
  } else {
    a.verb = req.method;
  }
  if (a.verb != "create") a.name = route.name;
  std::vector<Access> out{a};
  // The API server authorizes a server-side apply that creates the object as a create too.
  if (a.verb == "patch" && route.subresource.empty() &&
      req.get_header_value("Content-Type") == "application/apply-patch+yaml") {
    const auto bucket = objects_.find(route.type_key);
    if (bucket == objects_.end() || !bucket->second.contains(key(route.ns, route.name)))
      out.push_back({a.group, a.resource, "create", ""});
  }
  return out;
}

void FakeApiServer::respond_apply(const Route& route, const httplib::Request& req,
                                  httplib::Response& res) {
  const std::string manager = req.get_param_value("fieldManager");
  const bool force = req.get_param_value("force") == "true";
  if (manager.empty()) {
    return fail(res, 400, "BadRequest", "fieldManager is required for apply requests");
  }
  const Json body = Json::parse(req.body, nullptr, false);
  if (!body.is_object()) {
    return fail(res, 415, "UnsupportedMediaType", "the double accepts JSON apply bodies only");
  }
  if (!route.subresource.empty() || route.name.empty()) {
    return fail(res, 405, "MethodNotAllowed", "apply is modelled on objects only");
  }
  if (meta(body).value("name", "") != route.name) {
    return fail(res, 400, "BadRequest", "metadata.name does not match the URL");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto& bucket = objects_[route.type_key];
  const std::string object_key = key(route.ns, route.name);
  auto& owners = owners_[route.type_key][object_key];
  const std::set<std::string> fields = applied_fields(body);
  const auto found = bucket.find(object_key);
  if (found == bucket.end()) {
    Json object = body;
    object["metadata"]["namespace"] = route.ns;
    object.erase("status");
    owners[manager] = fields;
    const Json stored = store_locked(route.type_key, std::move(object), "ADDED");
    // The garbage collector removes an object whose owner is gone (here: at once).
    if (owner_missing_locked(stored)) erase_locked(route.type_key, route.ns, route.name);
    reply(res, 201, stored);
    return;
  }
  const Json current = found->second;
  std::vector<std::string> conflicts;
  for (const std::string& field : fields) {
    for (auto& [other, owned] : owners) {
      if (other == manager || owned.count(field) == 0) continue;
      if (field_value(current, field) == field_value(body, field)) continue;  // shared
      if (!force) {
        conflicts.push_back("conflict with \"" + other + "\": ." + field);
      } else {
        owned.erase(field);
      }
    }
  }
  if (!conflicts.empty()) {
    std::string msg = "Apply failed with " + std::to_string(conflicts.size()) + " conflict(s): ";
    for (const std::string& c : conflicts) msg += c + "; ";
    return fail(res, 409, "Conflict", msg);
  }
  Json next = current;
  for (const std::string& field : owners[manager]) {  // no longer applied: removed
    if (fields.count(field) > 0) continue;
    bool shared = false;
    for (const auto& [other, owned] : owners) shared |= other != manager && owned.count(field) > 0;
    if (!shared) set_field(next, field, Json());
  }
  for (const std::string& field : fields) set_field(next, field, field_value(body, field));
  owners[manager] = fields;
  if (next.value("spec", Json()) != current.value("spec", Json())) {
    next["metadata"]["generation"] = meta(current).value("generation", 1) + 1;
  }
  if (next == current) {
    reply(res, 200, current);  // a no-op apply writes nothing and keeps the resourceVersion
    return;
  }
  reply(res, 200, store_locked(route.type_key, std::move(next), "MODIFIED"));
}

void FakeApiServer::serve_watch(const Route& route, const httplib::Request& req,
                                httplib::Response& res) {
  const std::string selector = req.get_param_value("labelSelector");
  const bool bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
  int timeout = 300;
  if (req.has_param("timeoutSeconds")) timeout = std::stoi(req.get_param_value("timeoutSeconds"));
  const std::string from = req.get_param_value("resourceVersion");

  struct State {
    std::int64_t cursor = 0;
    std::int64_t watch_epoch = 0, compact_epoch = 0;
    std::vector<std::string> initial;  // lines to send first
    std::chrono::steady_clock::time_point deadline, next_bookmark;
    bool counted = true;  // in open_watches_ (the provider and releaser run on one thread)
  };
  auto state = std::make_shared<State>();
  const auto matches = [route, selector](const std::string& ns, const Json& object) {
    return (route.ns.empty() || ns == route.ns) &&
           (selector.empty() || labels_match(object, selector));
  };
  {
    std::lock_guard<std::mutex> lock(mutex_);
    state->watch_epoch = watch_epoch_;
    state->compact_epoch = compact_epoch_;
    if (from.empty() || from == "0") {
      // No version: the current objects as ADDED, then changes.
      for (const auto& [k, object] : objects_[route.type_key]) {
        if (matches(meta(object).value("namespace", ""), object)) {
          state->initial.push_back(Json{{"type", "ADDED"}, {"object", object}}.dump() + "\n");
        }
      }
      state->cursor = rv_;
    } else {
      state->cursor = std::stoll(from);
      if (state->cursor < compacted_rv_) {
        const Json gone = status_body(
            410, "Expired",
            "too old resource version: " + from + " (" + std::to_string(compacted_rv_) + ")");
        state->initial.push_back(Json{{"type", "ERROR"}, {"object", gone}}.dump() + "\n");
        state->cursor = -1;  // end after the error
      }
    }
  }
  const auto now = std::chrono::steady_clock::now();
  state->deadline = now + std::chrono::seconds(timeout);
  state->next_bookmark = now + bookmark_interval_.load();
  ++open_watches_;
  // A watch stops counting as open before its last bytes go out, so a client that has seen it end
  // never finds it still counted (the connection itself closes a moment later).
  const auto uncount = [this, state] {
    if (state->counted) --open_watches_;
    state->counted = false;
  };
  res.set_chunked_content_provider(
      "application/json",
      [this, state, route, matches, bookmarks, uncount](size_t, httplib::DataSink& sink) {
        if (state->cursor < 0) uncount();
        for (const std::string& line : state->initial) sink.write(line.data(), line.size());
        state->initial.clear();
        if (state->cursor < 0) {
          sink.done();
          return true;
        }
        std::vector<std::string> lines;
        bool end = false, drop = false;
        {
          std::unique_lock<std::mutex> lock(mutex_);
          changed_.wait_for(lock, std::chrono::milliseconds(20));
          if (stopping_ || watch_epoch_ != state->watch_epoch) {
            drop = true;
          } else if (compact_epoch_ != state->compact_epoch) {
            const Json gone = status_body(410, "Expired", "too old resource version (compacted)");
            lines.push_back(Json{{"type", "ERROR"}, {"object", gone}}.dump() + "\n");
            end = true;
          } else {
            for (const Event& e : events_) {
              if (e.rv <= state->cursor || e.type_key != route.type_key) continue;
              if (matches(e.ns, e.object)) {
                lines.push_back(Json{{"type", e.type}, {"object", e.object}}.dump() + "\n");
              }
            }
            if (!events_.empty()) state->cursor = std::max(state->cursor, events_.back().rv);
            const auto now = std::chrono::steady_clock::now();
            if (bookmarks && now >= state->next_bookmark) {
              const Json mark = {{"kind", "Bookmark"},
                                 {"apiVersion", "v1"},
                                 {"metadata", {{"resourceVersion", std::to_string(rv_)}}}};
              lines.push_back(Json{{"type", "BOOKMARK"}, {"object", mark}}.dump() + "\n");
              state->next_bookmark = now + bookmark_interval_.load();
            }
            end = now >= state->deadline;
          }
        }
        if (drop || end) uncount();
        if (drop) return false;  // closes the connection mid-stream
        for (const std::string& line : lines) {
          if (!sink.write(line.data(), line.size())) return false;
        }
        if (end) sink.done();
        return true;
      },
      [uncount](bool) { uncount(); });
}

}  // namespace nibble::kube::testing

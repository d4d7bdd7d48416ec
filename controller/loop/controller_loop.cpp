#include "controller/loop/controller_loop.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <set>

#include "controller/loop/engine_load.h"

namespace nibble::controller {
namespace {

namespace fs = std::filesystem;
using reconcile::Clock;
using reconcile::ReplicaPhase;

struct ReplicaCounts {
  int replicas = 0;       // not draining
  int ready = 0;          // ready, any spec
  int current_ready = 0;  // ready with the current spec
  int outdated = 0;       // not draining, older spec
};

ReplicaCounts count(const std::vector<reconcile::ObservedReplica>& observed,
                    const std::string& spec_hash) {
  ReplicaCounts c;
  for (const auto& r : observed) {
    if (r.phase == ReplicaPhase::kDraining) continue;
    ++c.replicas;
    c.ready += r.phase == ReplicaPhase::kReady;
    c.current_ready += r.phase == ReplicaPhase::kReady && r.spec_hash == spec_hash;
    c.outdated += r.spec_hash != spec_hash;
  }
  return c;
}

const char* phase_name(ReplicaPhase phase) {
  switch (phase) {
    case ReplicaPhase::kStarting:
      return "Starting";
    case ReplicaPhase::kReady:
      return "Ready";
    case ReplicaPhase::kExited:
      return "Exited";
    case ReplicaPhase::kDraining:
      return "Draining";
  }
  return "Unknown";
}

// Status with the three conditions set from (phase-defining) facts; previous keeps the
// transition times of conditions whose status did not change.
void set_conditions(RecipeStatus& st, const RecipeStatus& previous, bool ready,
                    const std::string& ready_reason, bool progressing,
                    const std::string& progressing_reason, const std::string& progressing_message,
                    bool degraded, const std::string& degraded_reason,
                    const std::string& degraded_message) {
  st.conditions.clear();
  set_condition(st.conditions,
                {"Ready", ready ? "True" : "False", ready_reason,
                 std::to_string(st.ready_replicas) + "/" + std::to_string(st.desired_replicas) +
                     " replicas ready",
                 ""},
                previous.conditions);
  set_condition(
      st.conditions,
      {"Progressing", progressing ? "True" : "False", progressing_reason, progressing_message, ""},
      previous.conditions);
  set_condition(st.conditions,
                {"Degraded", degraded ? "True" : "False", degraded ? degraded_reason : "AsExpected",
                 degraded ? degraded_message : "", ""},
                previous.conditions);
}

}  // namespace

ControllerLoop::ControllerLoop(ControllerLoopConfig config, store::RecipeStore& store,
                               local::LocalBackend& backend, ModelResolver& models,
                               router::RouteTable& routes, metrics::Registry& registry,
                               std::function<RouterLoad(const std::string&)> router_load)
    : config_(std::move(config)),
      store_(store),
      backend_(backend),
      models_(models),
      routes_(routes),
      metrics_(registry),
      router_load_(std::move(router_load)) {
  fs::create_directories(config_.state_dir / "status");
}

void ControllerLoop::reconcile_once() {
  const auto started = Clock::now();
  const auto now = started;
  std::set<std::string> names;
  std::vector<store::StoredRecipe> stored = store_.load();
  // A served name belongs to the recipe already serving it (its last valid spec, even while
  // its file holds an invalid edit), then to one whose engines a restarted controller adopted;
  // a newcomer claiming it is invalid, so a running recipe is never disturbed. Otherwise the
  // first by name wins.
  std::map<std::string, std::string> recipe_by_served_name;
  for (const store::StoredRecipe& s : stored) {
    auto it = running_.find(s.name);
    if (it != running_.end()) recipe_by_served_name.emplace(it->second.recipe.served_name, s.name);
  }
  for (const store::StoredRecipe& s : stored) {
    if (s.parsed.ok() && !backend_.replicas(s.name).empty())
      recipe_by_served_name.emplace(s.parsed.recipe.served_name, s.name);
  }
  for (store::StoredRecipe& s : stored) {
    names.insert(s.name);
    const RecipeStatus previous = status(s.name).value_or(RecipeStatus{});
    std::string invalid = s.parsed.ok() ? "" : s.parsed.error_text();
    if (s.parsed.ok()) {
      const auto other = recipe_by_served_name.emplace(s.parsed.recipe.served_name, s.name).first;
      if (other->second != s.name) {
        invalid = "spec.model.servedName: '" + s.parsed.recipe.served_name +
                  "' is already served by recipe '" + other->second + "'\n";
      } else {
        running_[s.name] = {s.parsed.recipe, s.spec_hash, s.generation};
      }
    } else {
      routes_.remove(s.name);
    }
    metrics_.reconciles.labels({s.name}).inc();
    RecipeStatus st;
    try {
      auto it = running_.find(s.name);
      if (it != running_.end()) {
        st = reconcile_recipe(it->second, previous, now);
      } else {
        st.name = s.name;
        st.phase = "Invalid";
        set_conditions(st, previous, false, "InvalidSpec", false, "InvalidSpec", "", true,
                       "InvalidSpec", invalid);
      }
    } catch (const std::exception& e) {
      metrics_.reconcile_errors.labels({s.name}).inc();
      spdlog::error("reconcile {}: {}", s.name, e.what());
      st = previous;
      st.name = s.name;
      st.last_error = e.what();
      st.phase = "Degraded";
      set_conditions(st, previous, st.ready_replicas > 0, "ReconcileError", false, "ReconcileError",
                     "", true, "ReconcileError", e.what());
    }
    if (!invalid.empty()) {
      // The last valid spec (if any) keeps running; the edit is reported, not applied.
      if (invalid.back() == '\n') invalid.pop_back();
      if (previous.last_error != invalid) {
        spdlog::error(
            "recipe {} ({}) is invalid; {}:\n{}", s.name, s.file.string(),
            running_.count(s.name) ? "the last valid spec keeps running" : "nothing started",
            invalid);
      }
      st.generation = s.generation;
      st.last_error = invalid;
      for (Condition& c : st.conditions) {
        if (c.type == "Degraded") {
          c = {"Degraded", "True", "InvalidSpec", invalid, c.last_transition_time};
          for (const Condition& p : previous.conditions)
            if (p.type == "Degraded" && p.status != "True") c.last_transition_time = rfc3339_now();
        }
      }
      if (st.phase != "Invalid") st.phase = "Degraded";
    }
    publish_status(st);
  }

  // Replicas of recipes whose files are gone are drained, then the recipe is forgotten.
  std::set<std::string> gone;
  for (const std::string& name : backend_.recipes()) gone.insert(name);
  for (const auto& [name, r] : running_) gone.insert(name);
  for (const RecipeStatus& st : statuses()) gone.insert(st.name);
  for (const std::string& name : gone) {
    if (names.count(name) == 0) drain_deleted(name, now);
  }
  metrics_.passes.inc();
  metrics_.pass_duration.observe(std::chrono::duration<double>(Clock::now() - started).count());
}

autoscaler::Load ControllerLoop::measure_load(const recipe::ModelRecipe& recipe) {
  const std::string& name = recipe.name;
  autoscaler::Load load;
  if (router_load_) {
    const RouterLoad r = router_load_(name);
    load.inflight = r.inflight;
    load.demand = r.held > 0;
    load.last_request = r.last_request;
  }
  // The engines' pages are fetched only when the recipe scales on what they report.
  if (recipe.autoscaling.metric == "inflight") return load;
  int scraped = 0;
  for (const local::ReadyEndpoint& e : backend_.ready_endpoints(name)) {
    if (auto m = scrape_engine_load(e.port)) {
      load.running += m->running;
      load.waiting += m->waiting;
      load.kv_cache_usage += m->kv_cache_usage;
      ++scraped;
    }
  }
  if (scraped > 0) load.kv_cache_usage /= scraped;
  return load;
}

RecipeStatus ControllerLoop::reconcile_recipe(const Running& running, const RecipeStatus& previous,
                                              Clock::time_point now) {
  const recipe::ModelRecipe& r = running.recipe;
  RecipeStatus st;
  st.name = r.name;
  st.served_name = r.served_name;
  st.generation = running.generation;
  st.observed_generation = running.generation;
  st.endpoint = config_.endpoint;

  const ResolvedModel model = models_.resolve(r.source);
  autoscaler::ScaleState& scale = scale_[r.name];
  const int before = scale.desired;
  const autoscaler::Decision decision = autoscaler::decide(r, measure_load(r), scale, now);
  const char* direction = before < 0 || decision.desired == before ? "keep"
                          : decision.desired > before              ? "up"
                                                                   : "down";
  metrics_.autoscaler_decisions.labels({r.name, direction}).inc();
  if (direction[0] == 'k') {
    spdlog::debug("autoscaler {}: {}", r.name, decision.reason);
  } else {
    spdlog::info("autoscaler {}: {}", r.name, decision.reason);
  }
  st.desired_replicas = decision.desired;
  st.autoscaler = decision.reason;

  const auto observed = backend_.observe(r.name, now);
  const reconcile::Plan plan =
      reconcile::plan_replicas({r.name, running.spec_hash, decision.desired, false}, observed, now);
  const bool model_ready = model.state == ResolvedModel::State::kReady;
  for (const reconcile::Action& a : plan.actions) {
    if (a.kind == reconcile::ActionKind::kStart && !model_ready) continue;
    if (a.kind == reconcile::ActionKind::kRemoveExited)
      metrics_.replica_restarts.labels({r.name}).inc();
    backend_.apply(r, running.spec_hash, model.dir, a, now);
  }

  router::RouteEntry route{r.name, r.served_name, {}, false};
  for (const local::ReadyEndpoint& e : backend_.ready_endpoints(r.name))
    route.ready.push_back({e.replica_id, e.port, "127.0.0.1"});
  // Requests wait for a replica that is coming; they fail fast when none can come.
  route.scale_from_zero =
      model.state != ResolvedModel::State::kFailed && (r.replicas.min == 0 || decision.desired > 0);
  const ReplicaCounts c = count(observed, running.spec_hash);
  route.starting = c.replicas > c.ready;
  routes_.publish(std::move(route));

  for (const local::ReplicaInfo& e : backend_.replicas(r.name)) {
    st.engines.push_back(
        {e.id, phase_name(e.phase), e.pid, e.port, e.spec_hash == running.spec_hash, e.log_file});
  }
  st.replicas = c.replicas;
  st.ready_replicas = c.ready;
  st.last_error = backend_.last_exit(r.name);
  metrics_.desired_replicas.labels({r.name}).set(decision.desired);
  metrics_.ready_replicas.labels({r.name}).set(c.ready);

  const bool serving = c.ready > 0;
  if (model.state == ResolvedModel::State::kDownloading) {
    st.phase = "Downloading";
    set_conditions(st, previous, serving, serving ? "ReplicasAvailable" : "Downloading", true,
                   "Downloading", model.message, false, "", "");
  } else if (model.state == ResolvedModel::State::kFailed) {
    st.phase = "Degraded";
    st.last_error = model.message;
    set_conditions(st, previous, serving, serving ? "ReplicasAvailable" : "ModelUnavailable", false,
                   "ModelUnavailable", "", true, "ModelUnavailable", model.message);
  } else if (plan.crash_loop) {
    st.phase = "Degraded";
    const auto wait = std::chrono::duration_cast<std::chrono::seconds>(plan.next_wake - now);
    set_conditions(st, previous, serving, serving ? "ReplicasAvailable" : "CrashLoopBackOff", true,
                   "CrashLoopBackOff", "", true, "CrashLoopBackOff",
                   st.last_error + "; restarting in " + std::to_string(wait.count()) + " s");
  } else if (decision.desired == 0 && c.replicas == 0) {
    st.phase = "ScaledToZero";
    set_conditions(st, previous, true, "ScaledToZero", false, "ScaledToZero",
                   "a request starts a replica", false, "", "");
  } else {
    const bool rolling = c.outdated > 0;
    const bool progressing =
        rolling || c.current_ready < decision.desired || c.replicas > decision.desired;
    st.phase = progressing ? "Progressing" : "Ready";
    const std::string reason = rolling                              ? "RollingUpdate"
                               : c.current_ready < decision.desired ? "ScalingUp"
                               : c.replicas > decision.desired      ? "ScalingDown"
                                                                    : "ReplicasReady";
    set_conditions(st, previous, serving, serving ? "ReplicasAvailable" : "NoReadyReplica",
                   progressing, reason,
                   std::to_string(c.current_ready) + " of " + std::to_string(decision.desired) +
                       " replicas ready with generation " + std::to_string(running.generation),
                   false, "", "");
  }
  return st;
}

void ControllerLoop::drain_deleted(const std::string& name, Clock::time_point now) {
  running_.erase(name);
  scale_.erase(name);
  routes_.remove(name);
  const auto observed = backend_.observe(name, now);
  if (observed.empty()) {
    forget_status(name);
    return;
  }
  recipe::ModelRecipe placeholder;
  placeholder.name = name;
  for (const auto& a : reconcile::plan_replicas({name, "", 0, true}, observed, now).actions)
    backend_.apply(placeholder, "", {}, a, now);
  RecipeStatus st = status(name).value_or(RecipeStatus{});
  st.name = name;
  st.phase = "Terminating";
  st.desired_replicas = 0;
  st.replicas = int(observed.size());
  st.ready_replicas = 0;
  st.engines.clear();
  for (const local::ReplicaInfo& e : backend_.replicas(name))
    st.engines.push_back({e.id, phase_name(e.phase), e.pid, e.port, false, e.log_file});
  publish_status(st);
}

void ControllerLoop::publish_status(const RecipeStatus& st) {
  std::string previous_phase;
  {
    std::lock_guard lock(mutex_);
    auto it = statuses_.find(st.name);
    if (it != statuses_.end()) previous_phase = it->second.phase;
    statuses_[st.name] = st;
  }
  if (previous_phase != st.phase) {
    if (!previous_phase.empty()) metrics_.recipe_phase.labels({st.name, previous_phase}).set(0);
    metrics_.recipe_phase.labels({st.name, st.phase}).set(1);
    spdlog::info("recipe {}: {} -> {} ({}/{} ready)", st.name,
                 previous_phase.empty() ? "new" : previous_phase, st.phase, st.ready_replicas,
                 st.desired_replicas);
  }
  const std::string text = to_json(st).dump(2) + "\n";
  std::string& written = last_written_[st.name];
  if (written == text) return;
  const fs::path path = config_.state_dir / "status" / (st.name + ".json");
  const fs::path tmp = path.string() + ".tmp";
  std::ofstream(tmp) << text;
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) spdlog::warn("cannot write {}: {}", path.string(), ec.message());
  written = text;
}

void ControllerLoop::forget_status(const std::string& name) {
  std::string phase;
  {
    std::lock_guard lock(mutex_);
    auto it = statuses_.find(name);
    if (it == statuses_.end()) return;
    phase = it->second.phase;
    statuses_.erase(it);
  }
  spdlog::info("recipe {} deleted; its replicas are gone", name);
  metrics_.recipe_phase.labels({name, phase}).set(0);
  metrics_.desired_replicas.labels({name}).set(0);
  metrics_.ready_replicas.labels({name}).set(0);
  last_written_.erase(name);
  std::error_code ec;
  fs::remove(config_.state_dir / "status" / (name + ".json"), ec);
}

void ControllerLoop::run(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    reconcile_once();
    std::unique_lock lock(mutex_);
    woken_.wait_for(lock, config_.resync, [&] { return wake_ || stop.load(); });
    wake_ = false;
  }
}

void ControllerLoop::wake() {
  {
    std::lock_guard lock(mutex_);
    wake_ = true;
  }
  woken_.notify_all();
}

std::vector<RecipeStatus> ControllerLoop::statuses() const {
  std::lock_guard lock(mutex_);
  std::vector<RecipeStatus> out;
  for (const auto& [name, st] : statuses_) out.push_back(st);
  return out;
}

std::optional<RecipeStatus> ControllerLoop::status(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = statuses_.find(name);
  if (it == statuses_.end()) return std::nullopt;
  return it->second;
}

}  // namespace nibble::controller

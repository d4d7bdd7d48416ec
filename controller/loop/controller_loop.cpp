#include "controller/loop/controller_loop.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>

#include "controller/loop/engine_load.h"
#include "controller/loop/engine_model_card.h"

namespace nibble::controller {
namespace {

namespace fs = std::filesystem;
using reconcile::Clock;
using reconcile::ReplicaPhase;

// How long a published replica count may take to come back through the spec before it is
// written again.
constexpr auto kPublishedWait = std::chrono::seconds(10);

// Counts the observed replicas into the facts conditions are derived from.
void count_replicas(const std::vector<reconcile::ReplicaView>& replicas,
                    const std::string& revision, reconcile::RecipeFacts& f) {
  for (const reconcile::ReplicaView& r : replicas) {
    if (r.phase == ReplicaPhase::kDraining) continue;
    const bool ready = r.phase == ReplicaPhase::kReady;
    ++f.replicas;
    f.ready += ready;
    f.current_ready += ready && r.revision == revision;
    f.outdated += r.revision != revision;
  }
}

std::vector<EngineStatus> engine_statuses(const std::vector<reconcile::ReplicaView>& replicas,
                                          const std::string& revision) {
  std::vector<EngineStatus> out;
  for (const reconcile::ReplicaView& r : replicas) {
    out.push_back({r.id, r.phase, r.pid, r.endpoint.host, r.endpoint.port,
                   !revision.empty() && r.revision == revision, r.restarts, r.log_file});
  }
  return out;
}

reconcile::ModelAvailability availability(ResolvedModel::State state) {
  switch (state) {
    case ResolvedModel::State::kReady:
      return reconcile::ModelAvailability::kReady;
    case ResolvedModel::State::kDownloading:
      return reconcile::ModelAvailability::kDownloading;
    case ResolvedModel::State::kFailed:
      return reconcile::ModelAvailability::kFailed;
  }
  return reconcile::ModelAvailability::kFailed;
}

// A recipe's weights are there when its model's and its draft model's are (a recipe without a
// draft: `draft` ready); else the state of the one missing, a failure before a download, and
// its message says which.
ResolvedModel with_draft_model(ResolvedModel model, ResolvedModel draft) {
  using State = ResolvedModel::State;
  if (draft.state == State::kReady || model.state == State::kFailed) return model;
  if (model.state == State::kReady || draft.state == State::kFailed) {
    model.state = draft.state;
    model.message = "draft model: " + draft.message;
  }
  return model;
}

// While every live replica is a restart after two or more failures in a row, the recipe is
// still crash-looping: between a restart and its next exit it would otherwise look as if a
// replica were coming (requests held for nothing, the model listed, then not). One failure is
// given its restart (an OOM kill, a lost node). The fewest failures among them; 0 when some
// replica starts afresh or after one failure, or none is live.
int failures_of_restarted(const std::vector<reconcile::ReplicaView>& replicas) {
  constexpr int kCrashLoopFailures = 2;
  int fewest = 0;
  for (const reconcile::ReplicaView& r : replicas) {
    if (r.phase == ReplicaPhase::kDraining || r.phase == ReplicaPhase::kExited) continue;
    if (r.restarts < kCrashLoopFailures) return 0;
    fewest = fewest == 0 ? r.restarts : std::min(fewest, r.restarts);
  }
  return fewest;
}

// Why a recipe with no ready replica cannot get one soon, for the router's 503; "" when one
// may come (starting, downloading, scaled to zero).
std::string unavailable_reason(const ResolvedModel& model,
                               const reconcile::RecipeObservation& observed,
                               const reconcile::RecipeFacts& facts) {
  if (facts.ready > 0) return "";
  if (model.state == ResolvedModel::State::kFailed)
    return "its weights cannot be fetched: " + model.message;
  std::string reason;
  if (observed.crash_loop) {
    reason = "its replicas are in CrashLoopBackOff (none ready; next restart in " +
             std::to_string(facts.retry_in.count()) + " s)";
  } else if (const int failures = failures_of_restarted(observed.replicas)) {
    reason = "its replicas are in CrashLoopBackOff (none ready; restarted after " +
             std::to_string(failures) + " failures, not ready yet)";
  } else {
    return "";
  }
  if (observed.exits.empty()) return reason;
  const reconcile::ReplicaExit& last = observed.exits.back();
  reason += ": " + last.description;
  // The engine's last words, one line each, cut so that a long line cannot swamp the message.
  constexpr std::size_t kLineChars = 300;
  std::string lines;
  for (std::size_t at = 0; at < last.last_log_lines.size();) {
    std::size_t nl = last.last_log_lines.find('\n', at);
    if (nl == std::string::npos) nl = last.last_log_lines.size();
    const std::string line = last.last_log_lines.substr(at, std::min(nl - at, kLineChars));
    if (!line.empty()) lines += (lines.empty() ? "" : " | ") + line;
    at = nl + 1;
  }
  if (!lines.empty()) reason += "; its last log lines: " + lines;
  return reason;
}

}  // namespace

const char* to_string(ScaleDirection direction) {
  switch (direction) {
    case ScaleDirection::kKeep:
      return "keep";
    case ScaleDirection::kUp:
      return "up";
    case ScaleDirection::kDown:
      return "down";
  }
  return "keep";
}

ControllerLoop::ControllerLoop(ControllerLoopConfig config, store::RecipeStore& store,
                               reconcile::ReplicaBackend& backend, ModelResolver& models,
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
    if (!invalid.empty() && invalid.back() == '\n') invalid.pop_back();
    reconcile::RecipeFacts facts;
    facts.invalid_spec = invalid;
    RecipeStatus st;
    auto it = running_.find(s.name);
    if (it == running_.end()) {
      st.name = s.name;
      facts.has_valid_spec = false;
      routes_.remove(s.name);  // a route expect_recipe() published for it, if any
    } else {
      try {
        st = reconcile_recipe(it->second, facts, now);
      } catch (const std::exception& e) {
        metrics_.reconcile_errors.labels({s.name}).inc();
        spdlog::error("reconcile {}: {}", s.name, e.what());
        st = previous;
        st.name = s.name;
        facts.reconcile_error = e.what();
        facts.desired = previous.desired_replicas;
        facts.ready = previous.ready_replicas;
      }
    }
    if (!invalid.empty()) {
      // The last valid spec (if any) keeps running; the edit is reported, not applied.
      st.generation = s.generation;
      if (previous.last_error != invalid) {
        spdlog::error(
            "recipe {} ({}) is invalid; {}:\n{}", s.name, s.origin,
            running_.count(s.name) ? "the last valid spec keeps running" : "nothing started",
            invalid);
      }
    }
    apply_derived(st, reconcile::derive_status(facts), previous, rfc3339_now());
    publish_status(st);
  }

  // Replicas of recipes whose files are gone are drained, then the recipe is forgotten.
  std::set<std::string> gone;
  for (const std::string& name : backend_.recipes()) gone.insert(name);
  for (const auto& [name, r] : running_) gone.insert(name);
  for (const RecipeStatus& st : statuses()) gone.insert(st.name);
  // A route expect_recipe() published for a recipe stored after this pass read the store stays;
  // one whose recipe is gone (deleted meanwhile) goes.
  for (const router::RouteEntry& e : routes_.entries())
    if (names.count(e.recipe) == 0 && store_.read(e.recipe).empty()) gone.insert(e.recipe);
  for (const std::string& name : gone) {
    if (names.count(name) != 0) continue;
    // A failed drain (an API server refusing the scale-down) is retried on the next pass; it
    // must not end the loop's thread, and with it the controller.
    try {
      drain_deleted(name, now);
    } catch (const std::exception& e) {
      metrics_.reconcile_errors.labels({name}).inc();
      spdlog::error("drain {}: {}", name, e.what());
    }
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
  for (const reconcile::ReplicaView& r : backend_.replicas(name)) {
    if (r.phase != ReplicaPhase::kReady) continue;
    if (auto m = scrape_engine_load(r.endpoint.host, r.endpoint.port, r.endpoint.api_key)) {
      load.running += m->running;
      load.waiting += m->waiting;
      load.kv_cache_usage += m->kv_cache_usage;
      ++scraped;
    }
  }
  if (scraped > 0) load.kv_cache_usage /= scraped;
  return load;
}

RecipeStatus ControllerLoop::reconcile_recipe(const Running& running, reconcile::RecipeFacts& facts,
                                              Clock::time_point now) {
  const recipe::ModelRecipe& r = running.recipe;
  RecipeStatus st;
  st.name = r.name;
  st.served_name = r.served_name;
  st.generation = running.generation;
  st.observed_generation = running.generation;
  st.endpoint = config_.endpoint;
  facts.generation = running.generation;

  ResolvedModel model{ResolvedModel::State::kReady, {}, ""};
  ResolvedModel draft = model;
  if (config_.resolve_models) {
    model = models_.resolve(r.source);
    if (r.engine.draft_model) draft = models_.resolve(*r.engine.draft_model);
  }
  const std::filesystem::path draft_dir = draft.dir;
  model = with_draft_model(std::move(model), std::move(draft));
  autoscaler::ScaleState& scale = scale_[r.name];
  const int before = scale.desired;
  const autoscaler::Decision decision = autoscaler::decide(r, measure_load(r), scale, now);
  const ScaleDirection direction = before < 0 || decision.desired == before ? ScaleDirection::kKeep
                                   : decision.desired > before              ? ScaleDirection::kUp
                                                                            : ScaleDirection::kDown;
  metrics_.autoscaler_decisions.labels({r.name, to_string(direction)}).inc();
  switch (direction) {
    case ScaleDirection::kKeep:
      spdlog::debug("autoscaler {}: {}", r.name, decision.reason);
      break;
    case ScaleDirection::kUp:
    case ScaleDirection::kDown:
      spdlog::info("autoscaler {}: {}", r.name, decision.reason);
      break;
  }
  st.desired_replicas = decision.desired;
  st.autoscaler = decision.reason;

  // Where the cluster holds the count, the replicas run what the spec says (the autoscaler's
  // last published decision, or what kubectl scale wrote while it is off), and a new decision
  // goes through the same field, so there is one source of truth for every writer.
  int replicas = decision.desired;
  if (config_.publish_replicas && r.autoscaling.enabled) {
    replicas = r.replicas.desired ? std::clamp(*r.replicas.desired, r.replicas.min, r.replicas.max)
                                  : r.replicas.min;
    // A count already written waits for the watch to bring it back (a pass may come first);
    // it is written again only if the spec moved meanwhile or it has not come back in time.
    const auto pending = published_.find(r.name);
    const bool awaited = pending != published_.end() &&
                         pending->second.replicas == decision.desired &&
                         pending->second.spec_then == r.replicas.desired &&
                         now - pending->second.at < kPublishedWait;
    if (r.replicas.desired == decision.desired) {
      published_.erase(r.name);
    } else if (!awaited) {
      try {
        config_.publish_replicas(r.name, decision.desired);
        published_[r.name] = {decision.desired, r.replicas.desired, now};
        spdlog::info("autoscaler {}: published {} replicas (spec.replicas.desired was {})", r.name,
                     decision.desired,
                     r.replicas.desired ? std::to_string(*r.replicas.desired) : "unset");
      } catch (const std::exception& e) {
        metrics_.reconcile_errors.labels({r.name}).inc();
        spdlog::error("autoscaler {}: cannot publish {} replicas: {}", r.name, decision.desired,
                      e.what());
        facts.reconcile_error =
            "cannot write " + std::to_string(decision.desired) + " replicas: " + e.what();
      }
    }
  }

  const bool model_ready = model.state == ResolvedModel::State::kReady;
  const reconcile::RecipeObservation observed = backend_.sync(
      {r, running.spec_hash, running.generation, replicas, !model_ready, model.dir, draft_dir},
      now);
  if (observed.restarted > 0)
    metrics_.replica_restarts.labels({r.name}).inc(double(observed.restarted));

  router::RouteEntry route{r.name, r.served_name, {}, false};
  for (const reconcile::ReplicaView& v : observed.replicas) {
    if (v.phase == ReplicaPhase::kReady)
      route.ready.push_back({v.id, v.endpoint.port, v.endpoint.host, v.endpoint.api_key});
  }
  facts.desired = decision.desired;
  count_replicas(observed.replicas, running.spec_hash, facts);
  facts.crash_loop = observed.crash_loop;
  facts.retry_in =
      std::max(std::chrono::seconds(0),
               std::chrono::duration_cast<std::chrono::seconds>(observed.retry_at - now));
  // Requests wait for a replica that is coming; they fail fast, saying why, when none can come.
  route.scale_from_zero =
      model.state != ResolvedModel::State::kFailed && (r.replicas.min == 0 || decision.desired > 0);
  route.starting = facts.replicas > facts.ready;
  route.unavailable = unavailable_reason(model, observed, facts);
  route.card = model_card(r, running.spec_hash, observed.replicas);
  routes_.publish(std::move(route));

  st.engines = engine_statuses(observed.replicas, running.spec_hash);
  st.replicas = facts.replicas;
  st.ready_replicas = facts.ready;
  metrics_.desired_replicas.labels({r.name}).set(decision.desired);
  metrics_.ready_replicas.labels({r.name}).set(facts.ready);

  facts.model = availability(model.state);
  facts.model_message = model.message;
  if (observed.downloading && facts.model == reconcile::ModelAvailability::kReady) {
    facts.model = reconcile::ModelAvailability::kDownloading;  // the pods fetch it (Kubernetes)
    facts.model_message = observed.downloading_message;
  }
  if (!observed.exits.empty()) facts.last_exit = observed.exits.back().description;
  return st;
}

router::ModelCard ControllerLoop::model_card(const recipe::ModelRecipe& r,
                                             const std::string& revision,
                                             const std::vector<reconcile::ReplicaView>& replicas) {
  KnownCard& known = cards_[r.name];
  if (known.revision != revision) {
    for (const reconcile::ReplicaView& v : replicas) {
      // Each ready replica of this revision is asked once: one that cannot answer is not
      // asked again every pass.
      if (v.phase != ReplicaPhase::kReady || v.revision != revision || known.asked.count(v.id))
        continue;
      known.asked.insert(v.id);
      if (auto card = fetch_model_card(v.endpoint.host, v.endpoint.port, v.endpoint.api_key,
                                       r.served_name)) {
        known = {revision, *card, {}};
        break;
      }
    }
  }
  if (!known.revision.empty()) return known.card;
  // No engine has answered yet (scaled to zero since the controller started): what the recipe
  // says, as the engine would say it (its root is the served name).
  return {r.served_name, r.engine.max_model_len.value_or(0)};
}

void ControllerLoop::expect_recipe(const recipe::ModelRecipe& recipe) {
  router::RouteEntry route{recipe.name, recipe.served_name, {}, true};
  route.starting = true;
  route.card = {recipe.served_name, recipe.engine.max_model_len.value_or(0)};
  if (routes_.publish_if_absent(std::move(route))) wake();
}

void ControllerLoop::drain_deleted(const std::string& name, Clock::time_point now) {
  running_.erase(name);
  cards_.erase(name);
  scale_.erase(name);
  published_.erase(name);
  routes_.remove(name);
  const reconcile::RecipeObservation observed = backend_.drain(name, now);
  if (observed.replicas.empty()) {
    forget_status(name);
    return;
  }
  const RecipeStatus previous = status(name).value_or(RecipeStatus{});
  RecipeStatus st = previous;
  st.name = name;
  st.desired_replicas = 0;
  st.ready_replicas = 0;
  st.replicas = int(observed.replicas.size());
  st.engines = engine_statuses(observed.replicas, "");
  reconcile::RecipeFacts facts;
  facts.deleted = true;
  facts.replicas = st.replicas;
  if (!observed.exits.empty()) facts.last_exit = observed.exits.back().description;
  apply_derived(st, reconcile::derive_status(facts), previous, rfc3339_now());
  publish_status(st);
}

void ControllerLoop::publish_status(const RecipeStatus& st) {
  std::optional<reconcile::RecipePhase> previous_phase;
  {
    std::lock_guard lock(mutex_);
    auto it = statuses_.find(st.name);
    if (it != statuses_.end()) previous_phase = it->second.phase;
    statuses_[st.name] = st;
  }
  if (previous_phase != st.phase) {
    const char* phase = reconcile::to_string(st.phase);
    if (previous_phase)
      metrics_.recipe_phase.labels({st.name, reconcile::to_string(*previous_phase)}).set(0);
    metrics_.recipe_phase.labels({st.name, phase}).set(1);
    spdlog::info("recipe {}: {} -> {} ({}/{} ready)", st.name,
                 previous_phase ? reconcile::to_string(*previous_phase) : "new", phase,
                 st.ready_replicas, st.desired_replicas);
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
  if (config_.status_changed) config_.status_changed(st);
}

void ControllerLoop::forget_status(const std::string& name) {
  reconcile::RecipePhase phase;
  {
    std::lock_guard lock(mutex_);
    auto it = statuses_.find(name);
    if (it == statuses_.end()) return;
    phase = it->second.phase;
    statuses_.erase(it);
  }
  spdlog::info("recipe {} deleted; its replicas are gone", name);
  metrics_.recipe_phase.labels({name, reconcile::to_string(phase)}).set(0);
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

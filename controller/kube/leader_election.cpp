#include "controller/kube/leader_election.h"

#include <spdlog/spdlog.h>

#include <ctime>

#include "controller/kube/resource_path.h"

namespace nibble::kube {

using Json = nlohmann::json;

std::string micro_time_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch() %
                                                                            std::chrono::seconds(1))
                          .count();
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(buf + n, sizeof buf - n, ".%06ldZ", static_cast<long>(micros));
  return buf;
}

LeaderElector::LeaderElector(const KubeClient& client, LeaderElectionConfig config)
    : client_(client), config_(std::move(config)) {}

std::string LeaderElector::lease_path() const {
  return object_path(kLeases, config_.namespace_name, config_.lease_name);
}

bool LeaderElector::try_acquire_or_renew() {
  const std::string now = micro_time_now();
  Json lease;
  try {
    lease = client_.get(lease_path());
  } catch (const KubeError& e) {
    if (!e.not_found()) throw;
    Json created = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", config_.lease_name}, {"namespace", config_.namespace_name}}},
        {"spec",
         {{"holderIdentity", config_.identity},
          {"leaseDurationSeconds", config_.lease_duration_seconds},
          {"acquireTime", now},
          {"renewTime", now},
          {"leaseTransitions", 0}}}};
    try {
      client_.create(collection_path(kLeases, config_.namespace_name), created);
      return true;
    } catch (const KubeError& create_error) {
      if (create_error.conflict()) return false;  // another candidate created it first
      throw;
    }
  }
  Json& spec = lease["spec"];
  if (!spec.is_object()) spec = Json::object();
  const std::string holder = spec.value("holderIdentity", "");
  if (!holder.empty() && holder != config_.identity) {
    // Expiry is judged by how long the record has stayed the same on our clock.
    const std::string record = spec.dump();
    const auto local_now = Clock::now();
    if (record != observed_record_) {
      observed_record_ = record;
      observed_at_ = local_now;
    }
    const int duration = spec.value("leaseDurationSeconds", config_.lease_duration_seconds);
    if (local_now - observed_at_ < std::chrono::seconds(duration)) return false;
    spdlog::info("leader election: lease {} of {} expired; taking it", config_.lease_name, holder);
  }
  if (holder != config_.identity) {
    spec["acquireTime"] = now;
    spec["leaseTransitions"] = spec.value("leaseTransitions", 0) + 1;
  }
  spec["holderIdentity"] = config_.identity;
  spec["leaseDurationSeconds"] = config_.lease_duration_seconds;
  spec["renewTime"] = now;
  try {
    client_.replace(lease_path(), lease);  // carries metadata.resourceVersion
    return true;
  } catch (const KubeError& e) {
    if (e.conflict()) return false;  // someone wrote it since our read: try next period
    throw;
  }
}

void LeaderElector::run(const std::function<void()>& on_started,
                        const std::function<void()>& on_stopped) {
  auto last_renew = Clock::now();
  while (!stopping_) {
    bool held = false;
    try {
      held = try_acquire_or_renew();
    } catch (const KubeError& e) {
      spdlog::warn("leader election: lease {}: {}", config_.lease_name, e.what());
    }
    const auto now = Clock::now();
    if (held) last_renew = now;
    if (held && !leader_) {
      leader_ = true;
      spdlog::info("leader election: {} leads (lease {}/{})", config_.identity,
                   config_.namespace_name, config_.lease_name);
      on_started();
    } else if (!held && leader_ && now - last_renew >= config_.renew_deadline) {
      leader_ = false;
      spdlog::warn("leader election: {} could not renew lease {} for {} ms; stopping",
                   config_.identity, config_.lease_name, config_.renew_deadline.count());
      on_stopped();
    }
    std::unique_lock<std::mutex> lock(sleep_mutex_);
    wake_.wait_for(lock, config_.retry_period, [this] { return stopping_.load(); });
  }
  if (leader_) {
    leader_ = false;
    on_stopped();
  }
}

void LeaderElector::stop() {
  stopping_ = true;
  std::lock_guard<std::mutex> lock(sleep_mutex_);
  wake_.notify_all();
}

void LeaderElector::release() {
  try {
    Json lease = client_.get(lease_path());
    if (lease["spec"].value("holderIdentity", "") != config_.identity) return;
    lease["spec"]["holderIdentity"] = "";
    lease["spec"]["renewTime"] = micro_time_now();
    client_.replace(lease_path(), lease);
    spdlog::info("leader election: {} released lease {}", config_.identity, config_.lease_name);
  } catch (const KubeError& e) {
    spdlog::warn("leader election: releasing lease {}: {}", config_.lease_name, e.what());
  }
}

}  // namespace nibble::kube

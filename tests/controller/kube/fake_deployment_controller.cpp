#include "tests/controller/kube/fake_deployment_controller.h"

#include <algorithm>
#include <vector>

namespace nibble::kube::testing {

using Json = nlohmann::json;

namespace {

constexpr const char* kDeploymentsType = "/apis/apps/v1/deployments";
constexpr const char* kPodsType = "/api/v1/pods";

bool selected(const Json& pod, const Json& match_labels) {
  const Json labels = pod["metadata"].value("labels", Json::object());
  for (const auto& [k, v] : match_labels.items()) {
    if (labels.value(k, "") != v) return false;
  }
  return true;
}

Json pod_status(const std::string& ip, bool ready) {
  const char* ready_text = ready ? "True" : "False";
  return {{"phase", "Running"},
          {"podIP", ip},
          {"conditions", Json::array({{{"type", "Ready"}, {"status", ready_text}}})},
          {"containerStatuses", Json::array({{{"name", "engine"},
                                              {"ready", ready},
                                              {"restartCount", 0},
                                              {"state", {{"running", Json::object()}}}}})}};
}

}  // namespace

FakeDeploymentController::FakeDeploymentController(FakeApiServer& server, Options options)
    : server_(server), options_(std::move(options)) {
  thread_ = std::thread([this] {
    while (!stopping_) {
      pass();
      std::this_thread::sleep_for(options_.period);
    }
  });
}

FakeDeploymentController::~FakeDeploymentController() {
  stopping_ = true;
  thread_.join();
}

void FakeDeploymentController::hold_readiness(const std::string& deployment, bool hold) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (hold) {
    held_.insert(deployment);
  } else {
    held_.erase(deployment);
  }
}

void FakeDeploymentController::pass() {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  const std::string& ns = options_.namespace_name;
  const std::vector<Json> pods = server_.objects(kPodsType, ns);
  for (const Json& deployment : server_.objects(kDeploymentsType, ns)) {
    const std::string name = deployment["metadata"].value("name", "");
    const Json spec = deployment.value("spec", Json::object());
    const int wanted = spec.value("replicas", 1);
    const Json match = spec.value("selector", Json::object()).value("matchLabels", Json::object());
    std::vector<Json> mine;
    for (const Json& pod : pods) {
      if (selected(pod, match)) mine.push_back(pod);
    }
    // Newest last: the index in the name.
    std::sort(mine.begin(), mine.end(), [this](const Json& a, const Json& b) {
      return born_[a["metadata"].value("name", "")] < born_[b["metadata"].value("name", "")];
    });
    while (int(mine.size()) > wanted) {
      const std::string pod = mine.back()["metadata"].value("name", "");
      server_.delete_object(kPodsType, ns, pod);
      born_.erase(pod);
      mine.pop_back();
    }
    for (int i = int(mine.size()); i < wanted; ++i) {
      const std::string pod = name + "-" + std::to_string(next_index_[name]++);
      Json labels = spec["template"]["metadata"].value("labels", Json::object());
      server_.put_object(kPodsType,
                         {{"apiVersion", "v1"},
                          {"kind", "Pod"},
                          {"metadata", {{"name", pod}, {"namespace", ns}, {"labels", labels}}},
                          {"status", pod_status(options_.pod_ip, false)}});
      born_[pod] = now;
      ++pods_created_;
    }
    for (Json pod : mine) {
      const std::string pod_name = pod["metadata"].value("name", "");
      const bool ready = !held_.contains(name) && now - born_[pod_name] >= options_.ready_after;
      const bool was_ready = pod["status"]["containerStatuses"][0].value("ready", false);
      if (ready == was_ready) continue;
      pod["status"] = pod_status(options_.pod_ip, ready);
      server_.put_object(kPodsType, pod);
    }
  }
}

}  // namespace nibble::kube::testing

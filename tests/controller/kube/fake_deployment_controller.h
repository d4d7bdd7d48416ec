#pragma once
// Plays kube-controller-manager's Deployment controller and the kubelet against the API-server
// double, so that tests see pods come and go as a cluster would make them: every `period`,
// each Deployment of the namespace gets exactly spec.replicas Pods (named <deployment>-<n>,
// labelled with its pod template's labels, at `pod_ip`). A new Pod is Running but not Ready,
// and turns Ready `ready_after` later unless readiness is held for its Deployment (an engine
// that never finishes loading); surplus Pods are deleted, newest first.
// Not modelled: ReplicaSets, rolling updates by template (pods keep the labels they were made
// with), scheduling, Deployment status.
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "tests/controller/kube/fake_api_server.h"

namespace nibble::kube::testing {

class FakeDeploymentController {
 public:
  struct Options {
    std::string namespace_name = "ns";
    std::string pod_ip = "127.0.0.1";
    std::chrono::milliseconds ready_after{200};
    std::chrono::milliseconds period{20};
  };
  FakeDeploymentController(FakeApiServer& server, Options options);
  ~FakeDeploymentController();

  // While held, the Deployment's Pods stay unready.
  void hold_readiness(const std::string& deployment, bool hold);
  int pods_created() const { return pods_created_.load(); }

 private:
  void pass();

  FakeApiServer& server_;
  Options options_;
  std::mutex mutex_;
  std::set<std::string> held_;
  std::map<std::string, std::chrono::steady_clock::time_point> born_;  // pod name → created
  std::map<std::string, int> next_index_;                              // by deployment
  std::atomic<int> pods_created_{0};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace nibble::kube::testing

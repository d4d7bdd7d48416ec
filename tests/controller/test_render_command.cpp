// `nibble render`: YAML that reads back as exactly the objects (types included), the JSON List
// form, and clear errors for bad input.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "controller/cli/render_command.h"
#include "tests/support/temp_dir.h"

namespace nibble::cli {
namespace {

using json = nlohmann::json;

// YAML → JSON the way a YAML 1.2 core-schema reader (kubectl's) resolves scalars: quoted ones
// are strings, plain ones may be null, booleans, integers or floats.
json to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : n) out[kv.first.as<std::string>()] = to_json(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : n) out.push_back(to_json(item));
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted
      static const std::regex kInt("[-+]?[0-9]+"),
          kFloat("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
      if (s == "null" || s == "~" || s.empty()) return nullptr;
      if (s == "true" || s == "false") return s == "true";
      if (std::regex_match(s, kInt)) return std::stoll(s);
      if (std::regex_match(s, kFloat)) return std::stod(s);
      return s;
    }
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return nullptr;
}

struct Rendered {
  int code;
  std::string out, err;
};

Rendered render(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int code = run_render(args, out, err);
  return {code, out.str(), err.str()};
}

std::string write(const nibble::testing::TempDir& dir, const std::string& name,
                  const std::string& text) {
  const auto path = dir.path() / name;
  std::ofstream(path) << text;
  return path.string();
}

const char* kTwoRecipes = R"(apiVersion: nibble.dev/v1alpha1
kind: ModelRecipe
metadata:
  name: qwen3
spec:
  model:
    source: hf://nvidia/Qwen3-30B-A3B-NVFP4
  placement:
    soloOnly: true
    nodeSelector: {feature.node.kubernetes.io/gpu: "true"}
---
apiVersion: nibble.dev/v1alpha1
kind: ModelRecipe
metadata:
  name: tiny
spec:
  model:
    source: /srv/models/tiny
  engine:
    device: cpu
    gpuMemoryUtilization: 0.5
  replicas: {min: 0, max: 2}
)";

TEST(RenderCommand, YamlReadsBackAsTheSameObjectsAsJson) {
  nibble::testing::TempDir dir;
  const std::string file = write(dir, "recipes.yaml", kTwoRecipes);
  const Rendered yaml =
      render({"-f", file, "--namespace", "ml", "--owner-uid", "u-1", "--pod-monitor"});
  ASSERT_EQ(yaml.code, 0) << yaml.err;
  const Rendered list =
      render({"-f", file, "--namespace=ml", "--owner-uid=u-1", "--pod-monitor", "-o", "json"});
  ASSERT_EQ(list.code, 0) << list.err;
  const json items = json::parse(list.out)["items"];
  // Deployment, Service, PodDisruptionBudget and PodMonitor per recipe.
  ASSERT_EQ(items.size(), 8u);

  const std::vector<YAML::Node> docs = YAML::LoadAll(yaml.out);
  ASSERT_EQ(docs.size(), items.size());
  for (std::size_t i = 0; i < docs.size(); ++i) EXPECT_EQ(to_json(docs[i]), items[i]) << i;

  EXPECT_EQ(items[0]["kind"], "Deployment");
  EXPECT_EQ(items[0]["metadata"]["namespace"], "ml");
  EXPECT_EQ(items[0]["spec"]["replicas"], 1);
  // A label value "true" stays a string; a replica count 0 (replicas.min) stays a number.
  EXPECT_EQ(items[0]["spec"]["template"]["spec"]["nodeSelector"]["feature.node.kubernetes.io/gpu"],
            "true");
  EXPECT_NE(yaml.out.find("feature.node.kubernetes.io/gpu: \"true\""), std::string::npos);
  EXPECT_EQ(items[4]["kind"], "Deployment");
  EXPECT_EQ(items[4]["metadata"]["name"], "tiny");
  EXPECT_EQ(items[4]["spec"]["replicas"], 0);
  EXPECT_EQ(yaml.out.rfind("---\n", 0), 0u);
  // The engine key: the Deployment names its Secret; no Secret and no key is printed.
  EXPECT_NE(yaml.out.find("secretName: " + items[0]["metadata"]["name"].get<std::string>() +
                          "-engine-key"),
            std::string::npos);
  EXPECT_NE(yaml.out.find("--api-key-file"), std::string::npos);
  for (const json& item : items) EXPECT_NE(item["kind"], "Secret");
  EXPECT_EQ(yaml.out.find("stringData"), std::string::npos);

  const Rendered scaled = render({"-f", file, "--replicas", "3", "-o", "json"});
  EXPECT_EQ(json::parse(scaled.out)["items"][0]["spec"]["replicas"], 3);
}

TEST(RenderCommand, BadInputGetsAClearErrorAndNoOutput) {
  nibble::testing::TempDir dir;
  const Rendered no_file = render({"--namespace", "ml"});
  EXPECT_EQ(no_file.code, 2);
  EXPECT_NE(no_file.err.find("-f FILE is required"), std::string::npos) << no_file.err;

  const Rendered unknown = render({"-f", "x.yaml", "--replicaz", "2"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("nibble render: unknown option --replicaz"), std::string::npos)
      << unknown.err;

  const Rendered missing = render({"-f", (dir.path() / "none.yaml").string()});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("cannot read"), std::string::npos);

  const std::string invalid = write(dir, "bad.yaml",
                                    std::string(kTwoRecipes) +
                                        "---\napiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\n"
                                        "metadata: {name: bad}\nspec:\n  model: {source: /m}\n"
                                        "  replicas: {min: 3, max: 1}\n");
  const Rendered bad = render({"-f", invalid});
  EXPECT_EQ(bad.code, 1);
  EXPECT_TRUE(bad.out.empty()) << "nothing is printed when a recipe is invalid";
  EXPECT_NE(bad.err.find("spec.replicas"), std::string::npos) << bad.err;

  const std::string relative = write(dir, "relative.yaml",
                                     "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\n"
                                     "metadata: {name: rel}\nspec:\n  model: {source: models/m}\n");
  const Rendered rel = render({"-f", relative});
  EXPECT_EQ(rel.code, 1);
  EXPECT_TRUE(rel.out.empty());
  EXPECT_NE(rel.err.find("relative path"), std::string::npos) << rel.err;
}

}  // namespace
}  // namespace nibble::cli

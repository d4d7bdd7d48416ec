#include "controller/cli/render_command.h"

#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "controller/kube/json_yaml.h"
#include "controller/kube/recipe_objects.h"
#include "controller/kube/render_flags.h"
#include "controller/recipe/recipe_parse.h"
#include "controller/recipe/yaml_documents.h"
#include "controller/store/recipe_store.h"

namespace nibble::cli {
namespace {

struct RenderArgs {
  std::vector<std::string> files;
  kube::RenderOptions options;
  kube::Owner owner;
  int replicas = -1;  // -1: the recipe's replicas.min
  bool json = false;
};

int parse_count(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  int n = -1;
  try {
    n = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || n < 0 || n > 1024)
    throw std::invalid_argument(flag + ": must be a whole number from 0 to 1024");
  return n;
}

RenderArgs parse_args(const std::vector<std::string>& args) {
  RenderArgs r;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string inline_value;
    bool has_inline = false;
    if (const auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_inline = true;
    }
    const std::string* next = has_inline            ? &inline_value
                              : i + 1 < args.size() ? &args[i + 1]
                                                    : nullptr;
    auto value = [&]() -> const std::string& {
      if (next == nullptr) throw std::invalid_argument(flag + " needs a value");
      if (!has_inline) ++i;
      return *next;
    };
    if (flag == "-f" || flag == "--filename") {
      r.files.push_back(value());
    } else if (flag == "--owner-uid") {
      r.owner.uid = value();
    } else if (flag == "--replicas") {
      r.replicas = parse_count(flag, value());
    } else if (flag == "-o" || flag == "--output") {
      const std::string& format = value();
      if (format != "yaml" && format != "json")
        throw std::invalid_argument("-o: must be yaml or json");
      r.json = format == "json";
    } else {
      switch (kube::apply_render_flag(flag, next, r.options)) {
        case kube::FlagUse::kNotMine:
          throw std::invalid_argument("unknown flag '" + args[i] + "'");
        case kube::FlagUse::kTookValue:
          if (!has_inline) ++i;
          break;
        case kube::FlagUse::kNoValue:
          if (has_inline) throw std::invalid_argument(flag + " takes no value");
          break;
      }
    }
  }
  if (r.files.empty()) throw std::invalid_argument("-f FILE is required");
  return r;
}

bool read_text(const std::string& file, std::string& text) {
  std::stringstream ss;
  if (file == "-") {
    ss << std::cin.rdbuf();
  } else {
    std::ifstream in(file);
    if (!in) return false;
    ss << in.rdbuf();
  }
  text = ss.str();
  return true;
}

}  // namespace

const char* render_usage() {
  return "usage: nibble render -f FILE [-f FILE...] [-o yaml|json] [--owner-uid UID] "
         "[--replicas N] [flags]\n"
         "  prints the Kubernetes objects the controller applies for each recipe\n"
         "  --owner-uid UID                the ModelRecipe's metadata.uid (adds ownerReferences)\n"
         "  --replicas N                   the Deployment's replicas (default: replicas.min)\n";
}

int run_render(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  RenderArgs r;
  try {
    r = parse_args(args);
  } catch (const std::invalid_argument& e) {
    err << "nibble render: " << e.what() << "\n" << render_usage() << kube::render_flags_usage();
    return 2;
  }
  std::vector<recipe::ModelRecipe> recipes;
  bool ok = true;
  for (const std::string& file : r.files) {
    std::string text;
    if (!read_text(file, text)) {
      err << "nibble render: cannot read " << file << "\n";
      return 2;
    }
    for (const std::string& doc : recipe::split_yaml_documents(text)) {
      recipe::ParseResult parsed = recipe::parse_model_recipe(doc);
      if (!parsed.ok()) {
        err << "nibble render: " << file << ": invalid ModelRecipe:\n" << parsed.error_text();
        ok = false;
        continue;
      }
      recipes.push_back(std::move(parsed.recipe));
    }
  }
  if (!ok) return 1;
  if (recipes.empty()) {
    err << "nibble render: no ModelRecipe in the files\n";
    return 1;
  }
  std::vector<nlohmann::json> objects;
  for (const recipe::ModelRecipe& recipe : recipes) {
    try {
      const int replicas = r.replicas >= 0 ? r.replicas : recipe.replicas.min;
      for (nlohmann::json& o :
           kube::recipe_objects(recipe, store::spec_hash(recipe), replicas, r.owner, r.options)
               .all())
        objects.push_back(std::move(o));
    } catch (const kube::RenderError& e) {
      err << "nibble render: recipe " << recipe.name << ": " << e.what() << "\n";
      return 1;
    }
  }
  if (r.json) {
    out << nlohmann::json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", objects}}.dump(2)
        << "\n";
    return 0;
  }
  for (const nlohmann::json& o : objects) out << "---\n" << kube::to_yaml(o);
  return 0;
}

}  // namespace nibble::cli

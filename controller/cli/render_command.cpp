#include "controller/cli/render_command.h"

#include <stdexcept>

#include "controller/cli/input_text.h"
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

RenderArgs parse_args(const std::vector<std::string>& args) {
  std::vector<char*> argv = {const_cast<char*>("render")};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  FlagReader flags("nibble render", int(argv.size()), argv.data());
  RenderArgs r;
  while (flags.next()) {
    if (flags.is("-f") || flags.is("--filename")) {
      r.files.push_back(flags.value());
    } else if (flags.is("--owner-uid")) {
      r.owner.uid = flags.value();
    } else if (flags.is("--replicas")) {
      r.replicas = int(flags.integer(0, 1024));
    } else if (flags.is("-o") || flags.is("--output")) {
      const std::string format = flags.value();
      if (format != "yaml" && format != "json")
        throw std::invalid_argument("-o: must be yaml or json, got '" + format + "'");
      r.json = format == "json";
    } else if (!kube::take_render_flag(flags, r.options)) {
      flags.unknown();
    }
  }
  if (r.files.empty()) throw std::invalid_argument("-f FILE is required");
  return r;
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
    const std::string message = e.what();  // the flag reader's own errors name the command
    err << (message.rfind("nibble render:", 0) == 0 ? "" : "nibble render: ") << message << "\n"
        << render_usage() << kube::render_flags_usage();
    return 2;
  }
  std::vector<recipe::ModelRecipe> recipes;
  bool ok = true;
  for (const std::string& file : r.files) {
    std::string text;
    if (!read_input(file, text)) {
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

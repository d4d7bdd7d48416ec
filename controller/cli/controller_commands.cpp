#include "controller/cli/controller_commands.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "controller/api/api_token.h"
#include "controller/cli/input_text.h"
#include "controller/cli/recipe_printer.h"
#include "controller/recipe/recipe_parse.h"
#include "controller/recipe/relative_model_path.h"
#include "controller/recipe/yaml_documents.h"

namespace nibble::cli {
namespace {

using nlohmann::json;

struct CommonArgs {
  std::string controller;
  std::vector<std::string> files;  // -f
  std::vector<std::string> positional;
  std::string output;  // -o
  std::string for_condition = "Ready";
  int timeout_s = 300;
  int tail = 50;
  bool dry_run = false;
  std::string error;
};

CommonArgs parse_args(const std::vector<std::string>& args) {
  CommonArgs a;
  const char* env = std::getenv("NIBBLE_CONTROLLER");
  a.controller = env != nullptr && *env != '\0' ? env : "http://127.0.0.1:8001";
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool inline_value = false;
    if (const auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      inline_value = true;
    }
    auto next = [&]() -> std::string {
      if (inline_value) return value;
      if (i + 1 >= args.size()) {
        a.error = flag + ": missing value";
        return "";
      }
      return args[++i];
    };
    if (flag == "--controller")
      a.controller = next();
    else if (flag == "-f" || flag == "--filename")
      a.files.push_back(next());
    else if (flag == "-o" || flag == "--output")
      a.output = next();
    else if (flag == "--dry-run")
      a.dry_run = true;
    else if (flag == "--for") {
      const std::string v = next();
      a.for_condition = v.rfind("condition=", 0) == 0 ? v.substr(10) : v;
    } else if (flag == "--timeout") {
      std::string v = next();
      if (!v.empty() && v.back() == 's') v.pop_back();
      a.timeout_s = std::atoi(v.c_str());
      if (a.timeout_s <= 0) a.error = "--timeout: expected seconds like 120s, got '" + v + "'";
    } else if (flag == "--tail") {
      const std::string v = next();
      a.tail = std::atoi(v.c_str());
      if (a.tail <= 0) a.error = "--tail: expected a line count, got '" + v + "'";
    } else if (!flag.empty() && flag[0] == '-' && flag != "-")
      a.error = "unknown option '" + flag + "'";
    else
      a.positional.push_back(flag);
    if (!a.error.empty()) break;
  }
  return a;
}

httplib::Client client_for(const std::string& url) {
  httplib::Client c(url);
  c.set_connection_timeout(3, 0);
  c.set_read_timeout(30, 0);
  // The controller API's token, when this user's controller has one (docs/security.md).
  if (const std::string token = controller::cli_api_token(); !token.empty())
    c.set_bearer_token_auth(token);
  return c;
}

// Prints why a call failed; returns the exit status to use.
int report_failure(const std::string& command, const std::string& url, const httplib::Result& res) {
  if (!res) {
    std::fprintf(stderr,
                 "nibble %s: cannot reach the controller at %s (%s): is nibble-controller "
                 "running? (--controller URL or $NIBBLE_CONTROLLER)\n",
                 command.c_str(), url.c_str(), httplib::to_string(res.error()).c_str());
    return 1;
  }
  const json body = json::parse(res->body, nullptr, false);
  std::string message = res->body;
  if (body.is_object() && body.contains("error") && body["error"].is_object())
    message = body["error"].value("message", res->body);
  std::fprintf(stderr, "nibble %s: %s (HTTP %d)\n", command.c_str(), message.c_str(), res->status);
  return 1;
}

// "recipe", "recipes", "modelrecipe(s)", "mr" and "recipe/NAME" forms, as kubectl takes them.
bool take_resource(std::vector<std::string>& positional) {
  if (positional.empty()) return false;
  std::string kind = positional.front();
  std::string name;
  if (const auto slash = kind.find('/'); slash != std::string::npos) {
    name = kind.substr(slash + 1);
    kind = kind.substr(0, slash);
  }
  for (const char* k : {"recipe", "recipes", "modelrecipe", "modelrecipes", "mr"}) {
    if (kind == k) {
      positional.erase(positional.begin());
      if (!name.empty()) positional.insert(positional.begin(), name);
      return true;
    }
  }
  return false;
}

}  // namespace

int run_apply(const std::vector<std::string>& args) {
  CommonArgs a = parse_args(args);
  if (a.error.empty() && a.files.empty())
    a.error = "usage: nibble apply -f FILE [-f FILE...] [--dry-run]";
  if (!a.error.empty()) {
    std::fprintf(stderr, "nibble apply: %s\n", a.error.c_str());
    return 2;
  }
  std::string body;
  for (const std::string& file : a.files) {
    std::string text;
    if (!read_input(file, text)) {
      std::fprintf(stderr, "nibble apply: cannot read %s\n", file.c_str());
      return 2;
    }
    body += "---\n" + text + "\n";
  }
  // A relative model path means this directory, which the controller cannot know.
  body = recipe::with_absolute_model_paths(body, std::filesystem::current_path());
  auto c = client_for(a.controller);
  auto res = c.Put(a.dry_run ? "/api/v1/recipes?dryRun=true" : "/api/v1/recipes", body,
                   "application/yaml");
  if (!res || res->status != 200) return report_failure("apply", a.controller, res);
  const json out = json::parse(res->body, nullptr, false);
  if (!out.is_object() || !out.contains("items")) return report_failure("apply", a.controller, res);
  for (const json& item : out["items"]) {
    std::printf("modelrecipe/%s %s\n", item.value("name", "").c_str(),
                item.value("result", "").c_str());
  }
  return 0;
}

int run_get(const std::vector<std::string>& args) {
  CommonArgs a = parse_args(args);
  if (a.error.empty() && !take_resource(a.positional))
    a.error = "usage: nibble get recipes [NAME] [-o wide|json]";
  if (a.error.empty() && !a.output.empty() && a.output != "wide" && a.output != "json")
    a.error = "-o: expected wide or json, got '" + a.output + "'";
  if (!a.error.empty()) {
    std::fprintf(stderr, "nibble get: %s\n", a.error.c_str());
    return 2;
  }
  auto c = client_for(a.controller);
  json items = json::array();
  if (a.positional.empty()) {
    auto res = c.Get("/api/v1/recipes");
    if (!res || res->status != 200) return report_failure("get", a.controller, res);
    const json list = json::parse(res->body, nullptr, false);
    if (list.is_object() && list.contains("items")) items = list["items"];
  } else {
    for (const std::string& name : a.positional) {
      auto res = c.Get("/api/v1/recipes/" + name);
      if (!res || res->status != 200) return report_failure("get", a.controller, res);
      const json one = json::parse(res->body, nullptr, false);
      if (one.is_object() && one.contains("status")) items.push_back(one["status"]);
    }
  }
  if (a.output == "json") {
    std::printf("%s\n", items.dump(2).c_str());
  } else {
    std::fputs(format_recipe_table(items, a.output == "wide").c_str(), stdout);
  }
  return 0;
}

int run_describe(const std::vector<std::string>& args) {
  CommonArgs a = parse_args(args);
  if (a.error.empty() && (!take_resource(a.positional) || a.positional.empty()))
    a.error = "usage: nibble describe recipe NAME";
  if (!a.error.empty()) {
    std::fprintf(stderr, "nibble describe: %s\n", a.error.c_str());
    return 2;
  }
  auto c = client_for(a.controller);
  for (std::size_t i = 0; i < a.positional.size(); ++i) {
    auto res = c.Get("/api/v1/recipes/" + a.positional[i]);
    if (!res || res->status != 200) return report_failure("describe", a.controller, res);
    const json one = json::parse(res->body, nullptr, false);
    if (!one.is_object()) return report_failure("describe", a.controller, res);
    if (i > 0) std::printf("\n");
    std::fputs(format_recipe_description(one.value("status", json::object()), one.value("spec", ""))
                   .c_str(),
               stdout);
  }
  return 0;
}

int run_delete(const std::vector<std::string>& args) {
  CommonArgs a = parse_args(args);
  std::vector<std::string> names;
  if (a.error.empty()) {
    if (!a.files.empty()) {
      for (const std::string& file : a.files) {
        std::string text;
        if (!read_input(file, text)) {
          std::fprintf(stderr, "nibble delete: cannot read %s\n", file.c_str());
          return 2;
        }
        for (const std::string& doc : recipe::split_yaml_documents(text)) {
          const recipe::ParseResult p = recipe::parse_model_recipe(doc);
          if (p.recipe.name.empty()) {
            std::fprintf(stderr, "nibble delete: %s: a recipe without metadata.name\n",
                         file.c_str());
            return 2;
          }
          names.push_back(p.recipe.name);
        }
      }
    } else if (take_resource(a.positional) && !a.positional.empty()) {
      names = a.positional;
    } else {
      a.error = "usage: nibble delete recipe NAME... | nibble delete -f FILE";
    }
  }
  if (!a.error.empty()) {
    std::fprintf(stderr, "nibble delete: %s\n", a.error.c_str());
    return 2;
  }
  auto c = client_for(a.controller);
  int status = 0;
  for (const std::string& name : names) {
    auto res = c.Delete("/api/v1/recipes/" + name);
    if (!res || res->status != 200) {
      status = report_failure("delete", a.controller, res);
      if (!res) return status;
      continue;
    }
    std::printf("modelrecipe/%s deleted\n", name.c_str());
  }
  return status;
}

int run_wait(const std::vector<std::string>& args) {
  CommonArgs a = parse_args(args);
  if (a.error.empty() && (!take_resource(a.positional) || a.positional.size() != 1))
    a.error = "usage: nibble wait recipe/NAME [--for condition=Ready] [--timeout 300s]";
  if (!a.error.empty()) {
    std::fprintf(stderr, "nibble wait: %s\n", a.error.c_str());
    return 2;
  }
  auto c = client_for(a.controller);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.timeout_s);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    auto res = c.Get("/api/v1/recipes/" + a.positional[0]);
    if (!res) {  // the controller may still be starting: keep trying until the timeout
      last = "controller unreachable: " + httplib::to_string(res.error());
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      continue;
    }
    const json one = json::parse(res->body, nullptr, false);
    if (res->status == 200 && one.is_object() && one.contains("status")) {
      const json& st = one["status"];
      for (const json& cond : st.value("conditions", json::array())) {
        if (cond.value("type", "") == a.for_condition && cond.value("status", "") == "True") {
          std::printf("modelrecipe/%s condition met\n", a.positional[0].c_str());
          return 0;
        }
      }
      last = st.value("phase", "");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  std::fprintf(stderr, "nibble wait: timed out after %d s waiting for %s on %s (last seen: %s)\n",
               a.timeout_s, a.for_condition.c_str(), a.positional[0].c_str(), last.c_str());
  return 1;
}

int run_logs(const std::vector<std::string>& args) {
  CommonArgs a = parse_args(args);
  if (a.error.empty() && (!take_resource(a.positional) || a.positional.size() != 1))
    a.error = "usage: nibble logs recipe/NAME [--tail N]";
  if (!a.error.empty()) {
    std::fprintf(stderr, "nibble logs: %s\n", a.error.c_str());
    return 2;
  }
  auto c = client_for(a.controller);
  auto res = c.Get("/api/v1/recipes/" + a.positional[0] + "/logs?tail=" + std::to_string(a.tail));
  if (!res || res->status != 200) return report_failure("logs", a.controller, res);
  std::fputs(res->body.c_str(), stdout);
  return 0;
}

}  // namespace nibble::cli

#include "controller/cli/controller_commands.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "controller/api/api_token.h"
#include "controller/cli/input_text.h"
#include "controller/cli/recipe_printer.h"
#include "controller/kube/json_yaml.h"
#include "controller/recipe/recipe_parse.h"
#include "controller/recipe/relative_model_path.h"
#include "controller/recipe/yaml_documents.h"

namespace nibble::cli {
namespace {

using nlohmann::json;

struct CommonArgs {
  std::string controller;
  std::vector<std::string> files;  // -f (but logs -f is --follow)
  std::vector<std::string> positional;
  std::string output;  // -o
  std::string for_condition = "Ready";
  int timeout_s = 300;
  int tail = 50;
  int replicas = -1;  // scale --replicas
  bool dry_run = false;
  bool watch = false;     // get -w
  bool follow = false;    // logs -f
  bool previous = false;  // logs -p
  std::string error;
};

// `command` decides the short flags that differ between commands, as in kubectl: -f is a file
// everywhere but in logs, where it follows.
CommonArgs parse_args(const std::vector<std::string>& args, const std::string& command = "") {
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
    else if (command == "logs" && (flag == "-f" || flag == "--follow"))
      a.follow = true;
    else if (command == "logs" && (flag == "-p" || flag == "--previous"))
      a.previous = true;
    else if (command == "get" && (flag == "-w" || flag == "--watch"))
      a.watch = true;
    else if (command == "scale" && flag == "--replicas") {
      const std::string v = next();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      a.replicas = !v.empty() && *end == '\0' && n >= 0 && n <= 1024 ? int(n) : -1;
      if (a.replicas < 0) a.error = "--replicas: expected a count from 0 to 1024, got '" + v + "'";
    } else if (flag == "-f" || flag == "--filename")
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

namespace {

// The recipes' status items: all of them, or the named ones. False (reported) on failure.
bool fetch_statuses(httplib::Client& c, const CommonArgs& a, json& items) {
  items = json::array();
  if (a.positional.empty()) {
    auto res = c.Get("/api/v1/recipes");
    if (!res || res->status != 200) return report_failure("get", a.controller, res) == 0;
    const json list = json::parse(res->body, nullptr, false);
    if (list.is_object() && list.contains("items")) items = list["items"];
    return true;
  }
  for (const std::string& name : a.positional) {
    auto res = c.Get("/api/v1/recipes/" + name);
    if (!res || res->status != 200) return report_failure("get", a.controller, res) == 0;
    const json one = json::parse(res->body, nullptr, false);
    if (one.is_object() && one.contains("status")) items.push_back(one["status"]);
  }
  return true;
}

// Items in the -o format: json and yaml as the API gives them, name as kubectl's TYPE/NAME.
std::string format_items(const json& items, const std::string& output) {
  if (output == "json") return items.dump(2) + "\n";
  if (output == "yaml") return kube::to_yaml(items);
  if (output == "name") {
    std::string text;
    for (const json& item : items) text += "modelrecipe/" + item.value("name", "") + "\n";
    return text;
  }
  return format_recipe_table(items, output == "wide");
}

// get -w: polls the API and prints each recipe again when what -o shows of it changed, as
// kubectl get -w does: a table row, padded to the columns of the table printed first, or one
// document per change.
int watch_statuses(httplib::Client& c, const CommonArgs& a, json items) {
  const bool table = a.output.empty() || a.output == "wide";
  std::vector<std::size_t> widths;  // the table's, as first printed
  for (const auto& row : recipe_table_rows(items, a.output == "wide")) format_row(row, widths);
  // What is shown of each recipe, by name: its cells, or its document.
  auto shown = [&](const json& list) {
    std::map<std::string, std::vector<std::string>> out;
    const auto rows = recipe_table_rows(list, a.output == "wide");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const json& item = list[i];
      std::vector<std::string>& cells = out[item.value("name", "")];
      if (table)
        cells = rows[i + 1];
      else if (a.output == "json")
        cells = {item.dump(2) + "\n"};
      else if (a.output == "yaml")
        cells = {"---\n" + kube::to_yaml(item)};
      else
        cells = {"modelrecipe/" + item.value("name", "") + "\n"};
    }
    return out;
  };
  auto last = shown(items);
  while (true) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    if (!fetch_statuses(c, a, items)) return 1;
    auto now = shown(items);
    std::string text;
    for (const json& item : items) {
      const std::vector<std::string>& cells = now[item.value("name", "")];
      const auto before = last.find(item.value("name", ""));
      if (before != last.end() && before->second == cells) continue;
      text += table ? format_row(cells, widths) : cells.front();
    }
    last = std::move(now);
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }
}

}  // namespace

int run_get(const std::vector<std::string>& args) {
  CommonArgs a = parse_args(args, "get");
  if (a.error.empty() && !take_resource(a.positional))
    a.error = "usage: nibble get recipes [NAME...] [-o wide|json|yaml|name] [-w]";
  if (a.error.empty() && !a.output.empty() && a.output != "wide" && a.output != "json" &&
      a.output != "yaml" && a.output != "name")
    a.error = "-o: expected wide, json, yaml or name, got '" + a.output + "'";
  if (!a.error.empty()) {
    std::fprintf(stderr, "nibble get: %s\n", a.error.c_str());
    return 2;
  }
  auto c = client_for(a.controller);
  json items;
  if (!fetch_statuses(c, a, items)) return 1;
  const std::string text = format_items(items, a.output);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  return a.watch ? watch_statuses(c, a, items) : 0;
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
  CommonArgs a = parse_args(args, "logs");
  if (a.error.empty() && (!take_resource(a.positional) || a.positional.size() != 1))
    a.error = "usage: nibble logs recipe/NAME [--tail N] [-f] [-p]";
  if (a.error.empty() && a.follow && a.previous)
    a.error = "-f and -p exclude each other: a previous replica writes nothing more";
  if (!a.error.empty()) {
    std::fprintf(stderr, "nibble logs: %s\n", a.error.c_str());
    return 2;
  }
  auto c = client_for(a.controller);
  const std::string path = "/api/v1/recipes/" + a.positional[0] + "/logs";
  auto res = c.Get(path + "?tail=" + std::to_string(a.tail) + (a.previous ? "&previous=true" : ""));
  if (!res || res->status != 200) return report_failure("logs", a.controller, res);
  std::fputs(res->body.c_str(), stdout);
  std::fflush(stdout);
  // -f: ask for what each engine wrote since the offsets of the last answer, until the recipe
  // is gone (404) or the command is interrupted.
  std::string offsets = res->get_header_value("X-Nibble-Log-Offsets");
  while (a.follow) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    res = c.Get(path + "?after=" + offsets);
    if (res && res->status == 404) return 0;
    if (!res || res->status != 200) return report_failure("logs", a.controller, res);
    std::fputs(res->body.c_str(), stdout);
    std::fflush(stdout);
    offsets = res->get_header_value("X-Nibble-Log-Offsets");
  }
  return 0;
}

int run_scale(const std::vector<std::string>& args) {
  CommonArgs a = parse_args(args, "scale");
  if (a.error.empty() && (!take_resource(a.positional) || a.positional.size() != 1))
    a.error = "usage: nibble scale recipe/NAME --replicas N";
  if (a.error.empty() && a.replicas < 0) a.error = "--replicas N is required";
  if (!a.error.empty()) {
    std::fprintf(stderr, "nibble scale: %s\n", a.error.c_str());
    return 2;
  }
  auto c = client_for(a.controller);
  auto res = c.Put("/api/v1/recipes/" + a.positional[0] + "/scale",
                   json{{"replicas", a.replicas}}.dump(), "application/json");
  if (!res || res->status != 200) return report_failure("scale", a.controller, res);
  const json out = json::parse(res->body, nullptr, false);
  if (!out.is_object()) return report_failure("scale", a.controller, res);
  std::printf("modelrecipe/%s %s\n", a.positional[0].c_str(), out.value("result", "").c_str());
  if (out.value("autoscaling", false)) {
    std::fprintf(stderr,
                 "nibble scale: note: spec.autoscaling.enabled is true, so the built-in "
                 "autoscaler starts from %d replicas and follows load; set it to false for the "
                 "count to hold\n",
                 a.replicas);
  }
  return 0;
}

}  // namespace nibble::cli

#include "controller/recipe/spark_vllm_import.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <map>
#include <stdexcept>

#include "controller/recipe/extra_args.h"
#include "controller/recipe/recipe_parse.h"
#include "controller/recipe/recipe_yaml.h"
#include "engine/cli/serve_flags.h"

namespace nibble::recipe {
namespace {

// vLLM flags that take no value (so the next word is not theirs).
bool is_switch(const std::string& flag) {
  static const char* const kSwitches[] = {"--enable-prefix-caching",
                                          "--no-enable-prefix-caching",
                                          "--trust-remote-code",
                                          "--enable-auto-tool-choice",
                                          "--enforce-eager",
                                          "--enable-chunked-prefill",
                                          "--no-enable-chunked-prefill",
                                          "--disable-log-requests",
                                          "--disable-log-stats",
                                          "--enable-expert-parallel",
                                          "--async-scheduling",
                                          "--no-async-scheduling",
                                          "--disable-custom-all-reduce",
                                          "--enable-sleep-mode",
                                          "--disable-cascade-attn"};
  for (const char* s : kSwitches) {
    if (flag == s) return true;
  }
  // The engine's own switches, which share vLLM's names.
  const engine::cli::ServeFlag* engine_flag =
      flag.starts_with("--") ? engine::cli::find_serve_flag(flag.substr(2)) : nullptr;
  return engine_flag != nullptr && engine_flag->value != engine::cli::FlagValue::kRequired;
}

// A vLLM flag that nibble-engine serve takes under the same name and a recipe may set
// (--reasoning-parser, --enable-auto-tool-choice, --tool-call-parser, ...) goes to
// spec.engine.extraArgs, if the engine accepts its value; "" when it went there, else why not.
std::string pass_to_engine(const std::string& flag, const std::string& value, bool has_value,
                           std::vector<std::string>& extra_args) {
  const engine::cli::ServeFlag* engine_flag = engine::cli::find_serve_flag(flag.substr(2));
  if (engine_flag == nullptr || engine_flag->owner != engine::cli::FlagOwner::kRecipe)
    return "no Nibble equivalent";
  std::vector<std::string> args = {flag};
  if (has_value) args.push_back(value);
  std::vector<FieldError> errors;
  check_extra_args(args, errors);
  if (!errors.empty()) return "nibble-engine refuses it: " + errors.front().message;
  extra_args.insert(extra_args.end(), args.begin(), args.end());
  return "";
}

// Replaces {name} with the recipe's defaults; unknown placeholders stay and are reported.
std::string substitute(std::string command, const std::map<std::string, std::string>& defaults,
                       std::vector<std::string>& errors) {
  std::string out;
  for (std::size_t i = 0; i < command.size(); ++i) {
    if (command[i] != '{') {
      out += command[i];
      continue;
    }
    const std::size_t close = command.find('}', i);
    if (close == std::string::npos) {
      out += command.substr(i);
      break;
    }
    const std::string key = command.substr(i + 1, close - i - 1);
    auto it = defaults.find(key);
    if (it == defaults.end()) {
      errors.push_back("command uses {" + key + "} but defaults has no '" + key + "'");
      out += command.substr(i, close - i + 1);
    } else {
      out += it->second;
    }
    i = close;
  }
  return out;
}

std::string kv_cache_dtype(const std::string& v) {
  if (v == "auto") return "auto";
  if (v.starts_with("fp8")) return "fp8";
  if (v == "bfloat16" || v == "bf16") return "bf16";
  return "";
}

}  // namespace

std::vector<std::string> split_command_line(const std::string& command) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (std::size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < command.size()) {
        word += command[++i];
      } else {
        word += c;
      }
      continue;
    }
    if (c == '\\' && i + 1 < command.size()) {
      if (command[i + 1] == '\n') {  // line continuation
        ++i;
        continue;
      }
      word += command[++i];
      in_word = true;
    } else if (c == '"' || c == '\'') {
      quote = c;
      in_word = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote) throw std::invalid_argument(std::string("unclosed ") + quote + " quote in command");
  if (in_word) words.push_back(word);
  return words;
}

std::string to_dns1123_label(const std::string& name) {
  std::string out;
  for (char c : name) {
    const char l = char(std::tolower(static_cast<unsigned char>(c)));
    if ((l >= 'a' && l <= 'z') || (l >= '0' && l <= '9')) {
      out += l;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  if (out.size() > 63) out.resize(63);
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "imported" : out;
}

ImportResult import_spark_vllm_recipe(const std::string& yaml_text) {
  ImportResult result;
  auto& errors = result.errors;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    errors.push_back(std::string("not valid YAML: ") + e.what());
    return result;
  }
  if (!root.IsMap()) {
    errors.push_back("a spark-vllm recipe is a mapping with at least name and command");
    return result;
  }
  try {
    auto text = [&](const char* key) {
      return root[key] && root[key].IsScalar() ? root[key].as<std::string>() : std::string();
    };
    const std::string name = text("name");
    const std::string command = text("command");
    if (name.empty()) errors.push_back("'name' is required");
    if (command.empty()) errors.push_back("'command' is required (a vllm serve command line)");
    if (root["cluster_only"] && root["cluster_only"].as<bool>(false)) {
      errors.push_back(
          "the recipe is cluster_only (needs several machines); Nibble runs one engine per "
          "machine and does not split a model across machines");
    }
    if (!errors.empty()) return result;

    std::map<std::string, std::string> defaults;
    if (root["defaults"] && root["defaults"].IsMap()) {
      for (const auto& item : root["defaults"]) {
        if (item.second.IsScalar())
          defaults[item.first.as<std::string>()] = item.second.as<std::string>();
      }
    }
    std::vector<std::string> words;
    try {
      words = split_command_line(substitute(command, defaults, errors));
    } catch (const std::invalid_argument& e) {
      errors.push_back(e.what());
    }
    if (words.size() < 3 || words[0] != "vllm" || words[1] != "serve") {
      errors.push_back("command must start with 'vllm serve MODEL'");
    }
    if (!errors.empty()) return result;

    ModelRecipe& r = result.recipe;
    r.name = to_dns1123_label(name);
    const std::string model = text("model").empty() ? words[2] : text("model");
    std::vector<FieldError> source_errors;
    const std::string source =
        model.starts_with("/") || model.starts_with(".") ? model : "hf://" + model;
    r.source = parse_model_source(source, source_errors);
    for (const FieldError& e : source_errors)
      errors.push_back("model '" + model + "': " + e.message);
    r.served_name = words[2];  // vLLM serves under the model argument unless told otherwise
    r.placement.solo_only = root["solo_only"] && root["solo_only"].as<bool>(false);

    for (std::size_t i = 3; i < words.size(); ++i) {
      std::string flag = words[i], value;
      bool has_value = false;
      if (const auto eq = flag.find('='); flag.starts_with("--") && eq != std::string::npos) {
        value = flag.substr(eq + 1);
        flag = flag.substr(0, eq);
        has_value = true;
      } else if (flag.starts_with("-") && !is_switch(flag) && i + 1 < words.size() &&
                 !words[i + 1].starts_with("--")) {
        value = words[++i];
        has_value = true;
      }
      const std::string written = has_value ? flag + " " + value : flag;
      auto drop = [&](const std::string& reason) { result.dropped.push_back({written, reason}); };
      auto to_int = [&](int& target) {
        try {
          target = std::stoi(value);
        } catch (const std::exception&) {
          drop("value is not an integer");
        }
      };
      if (flag == "--max-model-len") {
        int v = 0;
        to_int(v);
        if (v > 0) r.engine.max_model_len = v;
      } else if (flag == "--max-num-seqs") {
        to_int(r.engine.max_num_seqs);
      } else if (flag == "--max-num-batched-tokens") {
        int v = 0;
        to_int(v);
        if (v > 0) r.engine.max_num_batched_tokens = v;
      } else if (flag == "--gpu-memory-utilization") {
        try {
          r.engine.gpu_memory_utilization = std::stod(value);
        } catch (const std::exception&) {
          drop("value is not a number");
        }
      } else if (flag == "--kv-cache-dtype") {
        const std::string dtype = kv_cache_dtype(value);
        if (dtype.empty())
          drop("Nibble stores the KV cache as auto, bf16 or fp8");
        else
          r.engine.kv_cache_dtype = dtype;
      } else if (flag == "--enable-prefix-caching") {
        r.engine.enable_prefix_caching = true;
      } else if (flag == "--no-enable-prefix-caching") {
        r.engine.enable_prefix_caching = false;
      } else if (flag == "--served-model-name") {
        r.served_name = value;
      } else if (flag == "--port" || flag == "--host") {
        drop("the controller assigns each replica's address and routes :8000 to all of them");
      } else if (flag == "-tp" || flag == "--tensor-parallel-size") {
        if (value != "1") drop("Nibble runs one engine per GPU; scale with replicas instead");
      } else if (flag == "--quantization" || flag == "-q") {
        drop("Nibble detects the NVFP4 layout from the checkpoint");
      } else if (flag == "--trust-remote-code") {
        drop("Nibble runs no model code from the checkpoint");
      } else if (flag.starts_with("--")) {
        const std::string why = pass_to_engine(flag, value, has_value, r.engine.extra_args);
        if (!why.empty()) drop(why);
      } else {
        drop("no Nibble equivalent");
      }
    }
  } catch (const YAML::Exception& e) {
    errors.push_back(std::string("malformed recipe: ") + e.what());
  }
  return result;
}

std::string imported_recipe_text(const std::string& source_path, const ImportResult& result) {
  std::string text = "# imported from " + source_path + " by nibble import\n";
  for (const DroppedFlag& d : result.dropped)
    text += "# dropped vLLM flag " + d.flag + ": " + d.reason + "\n";
  text += to_yaml(result.recipe);
  if (!text.ends_with('\n')) text += '\n';
  return text;
}

}  // namespace nibble::recipe

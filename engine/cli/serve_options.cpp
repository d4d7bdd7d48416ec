#include "engine/cli/serve_options.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>

#include "engine/cli/backend_flags.h"
#include "engine/cli/serve_flags.h"

namespace nibble::engine::cli {

namespace {

const char* const kServeFlagsUsage = R"(usage: nibble-engine serve MODEL [options]
       nibble-engine serve --model MODEL [options]

Serves the model over an OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions,
/v1/models, /tokenize, /detokenize, /health, /metrics, /version).

MODEL is a Hugging Face-layout model directory (BF16 or NVFP4), or a Hub id (org/name or
hf://org/name[@revision]): taken from the model cache, else downloaded into it when the Hub
answers ($HF_ENDPOINT, $HF_TOKEN). `nibble pull hf://org/name` fills the cache beforehand.

  --model MODEL                    the model, instead of the positional argument
  --download-dir DIR               the model cache (default $NIBBLE_CACHE or ~/.cache/nibble,
                                   the one nibble pull and the controller fill)
  --config FILE                    YAML file of these options (keys: long names); flags win
  --host ADDR                      listen address (default 127.0.0.1)
  --port N                         listen port (default 8000)
  --served-model-name NAME         the name clients use (default: the directory's name)
  --max-model-len N                prompt + output tokens per sequence (default: the model's)
  --max-num-seqs N                 sequences in a batch (default 256)
  --max-num-batched-tokens N       tokens per engine step, prefill and decode (default 4096 on a
                                   GPU, 2048 on the CPU)
  --gpu-memory-utilization F       fraction of GPU memory to use (default 0.9)
  --kv-cache-dtype auto|bf16|fp8   KV cache storage (default auto: BF16 on a GPU, FP32 on the CPU;
                                   fp8: E4M3 with a scale per token and KV head, GPU only)
  --kv-cache-memory-bytes N        KV cache size in bytes (default: on a GPU what
                                   --gpu-memory-utilization leaves, on the CPU 1 GiB)
  --enable-prefix-caching          reuse KV of repeated prefixes (default on)
  --no-enable-prefix-caching       turn it off
  --api-key KEY                    require 'Authorization: Bearer KEY' on every path but
                                   /health, /version and /metrics (repeatable: any of them
                                   works; or $NIBBLE_API_KEY)
  --api-key-file FILE              API keys from a file, one per line (repeatable)
  --metrics-require-key            require the API key on /metrics too
  --allowed-origins LIST           browser origins (comma-separated scheme://host[:port], or *)
                                   whose pages may call the API cross-origin (default: none)
  --device auto|cpu|cuda           compute backend (default auto: cuda if built and present)
  --enforce-eager                  run every step eagerly: no CUDA graphs for decode steps
  --quantization nvfp4             quantize a BF16 checkpoint to NVFP4 while loading
  --max-queue-len N                waiting requests before 503 (default 1024)
  --max-request-body-bytes N       larger bodies get 413 (default 33554432)
  --max-json-depth N               deepest nesting of arrays and objects in a request, and of
                                   subschemas and regex groups in a structured output; deeper
                                   gets 400 (default 128)
  --max-prompt-bytes-per-token N   a prompt over max-model-len * N bytes gets 400 before it is
                                   tokenized (default 32)
  --drain-timeout SECONDS          on SIGTERM, time running requests get to finish (default 30)
  --threads N                      CPU backend threads (default: all cores)
  --http-threads N                 HTTP worker threads; each open stream holds one (default 256)
  --http-read-timeout SECONDS      drop a client silent this long while sending its request
                                   (default 5)
  --max-pending-connections-per-client N
                                   slow connections (waiting over 0.5 s on their request) one
                                   address may hold before its longest waiting one is closed
                                   (default: a quarter of --http-threads)
  --log-level trace|debug|info|warn|error
  --access-log                     a line per request at info: method, path, status, model,
                                   tokens, time to first token, duration; never prompt text
                                   (default on; /health and /metrics at debug)
  --no-access-log                  turn it off
  --log-stats-interval SECONDS     every SECONDS, a line of prompt and generation throughput,
                                   running and waiting requests, KV cache usage and prefix
                                   cache hit rate, at info while there is work (default 10;
                                   0: none)
  --disable-log-stats              no stats lines (vLLM's name for --log-stats-interval 0)
  --tool-call-parser hermes|llama3_json|mistral|openai
                                   how tool calls look in the model's output (default: the
                                   format the chat template shows, if any; openai: gpt-oss's
                                   harmony channels, chosen by its template too)
  --enable-auto-tool-choice        parse tool calls for tool_choice "auto" (the default when
                                   tools are sent); without it such requests get 400, as in vLLM
  --exclude-tools-when-tool-choice-none
                                   do not render 'tools' into the prompt for tool_choice "none"
  --reasoning-parser qwen3|deepseek_r1|openai_gptoss
                                   return the model's thinking as reasoning_content
  --token-mask-overlap V           true|false: compute structured outputs' token masks while
                                   the step's forward pass runs (default true)
  --token-mask-threads N           threads computing one step's token masks (default 4)
  --speculative-config JSON        speculative decoding, vLLM's keys: {"method": "ngram",
                                   "num_speculative_tokens": K, "prompt_lookup_min": N,
                                   "prompt_lookup_max": M}, or {"method": "draft_model",
                                   "model": DIR, "num_speculative_tokens": K} (a small
                                   model of the same vocabulary), or {"method": "mtp",
                                   "num_speculative_tokens": K} (the model's own MTP module:
                                   Qwen3-Next, CPU backend), or {"method": "eagle3",
                                   "model": DIR, "num_speculative_tokens": K} (an EAGLE-3
                                   head trained for the model, CPU backend)

Tuning (A/B switches and fallbacks; the defaults are the forms that measured fastest,
docs/performance.md):
)";

}  // namespace

const std::string& serve_usage() {
  static const std::string usage = kServeFlagsUsage + backend_flags_usage();
  return usage;
}

namespace {

using Setter = std::function<void(const std::string& flag, const std::string& value)>;

long long to_integer(const std::string& flag, const std::string& value, long long lo,
                     long long hi) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || v < lo || v > hi) {
    throw std::invalid_argument("--" + flag + " expects an integer in [" + std::to_string(lo) +
                                ", " + std::to_string(hi) + "], got '" + value + "'");
  }
  return v;
}

double to_number(const std::string& flag, const std::string& value, double lo, double hi) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end || !(v >= lo && v <= hi)) {
    throw std::invalid_argument("--" + flag + " expects a number in [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "], got '" + value + "'");
  }
  return v;
}

std::string one_of(const std::string& flag, const std::string& value,
                   std::initializer_list<const char*> choices) {
  for (const char* c : choices) {
    if (value == c) return value;
  }
  std::string list;
  for (const char* c : choices) list += std::string(list.empty() ? "" : ", ") + c;
  throw std::invalid_argument("--" + flag + " must be one of " + list + ", got '" + value + "'");
}

bool to_bool(const std::string& flag, const std::string& value) {
  if (value == "true" || value == "1" || value == "yes") return true;
  if (value == "false" || value == "0" || value == "no") return false;
  throw std::invalid_argument("--" + flag + " expects true or false, got '" + value + "'");
}

// Flags that take a value, by long name without dashes.
std::map<std::string, Setter> value_flags(ServeOptions& o) {
  constexpr long long kMax = std::numeric_limits<int>::max();
  return {
      {"model", [&](auto&, auto& v) { o.model = v; }},
      {"download-dir", [&](auto&, auto& v) { o.download_dir = v; }},
      {"host", [&](auto&, auto& v) { o.host = v; }},
      {"port", [&](auto& f, auto& v) { o.port = int(to_integer(f, v, 0, 65535)); }},
      {"served-model-name", [&](auto&, auto& v) { o.served_model_name = v; }},
      {"max-model-len",
       [&](auto& f, auto& v) { o.max_model_len = int(to_integer(f, v, 1, kMax)); }},
      {"max-num-seqs", [&](auto& f, auto& v) { o.max_num_seqs = int(to_integer(f, v, 1, 65536)); }},
      {"max-num-batched-tokens",
       [&](auto& f, auto& v) { o.max_num_batched_tokens = int(to_integer(f, v, 1, kMax)); }},
      {"gpu-memory-utilization",
       [&](auto& f, auto& v) { o.gpu_memory_utilization = to_number(f, v, 0.01, 1.0); }},
      {"kv-cache-dtype",
       [&](auto& f, auto& v) {
         o.kv_cache_dtype = one_of(f, v, {"auto", "bf16", "fp8"});
       }},
      {"kv-cache-memory-bytes",
       [&](auto& f, auto& v) { o.kv_cache_memory_bytes = to_integer(f, v, 1, 1ll << 50); }},
      {"enable-prefix-caching", [&](auto& f, auto& v) { o.enable_prefix_caching = to_bool(f, v); }},
      {"api-key",
       [&](auto& f, auto& v) {
         if (v.empty()) throw std::invalid_argument("--" + f + " must not be empty");
         o.api_keys.push_back(v);
       }},
      {"api-key-file", [&](auto&, auto& v) { o.api_key_files.push_back(v); }},
      {"metrics-require-key", [&](auto& f, auto& v) { o.metrics_require_key = to_bool(f, v); }},
      {"allowed-origins", [&](auto&, auto& v) { o.allowed_origins = v; }},
      {"device",
       [&](auto& f, auto& v) {
         o.device = one_of(f, v, {"auto", "cpu", "cuda"});
       }},
      {"enforce-eager", [&](auto& f, auto& v) { o.enforce_eager = to_bool(f, v); }},
      {"quantization", [&](auto& f, auto& v) { o.quantization = one_of(f, v, {"nvfp4"}); }},
      {"max-queue-len",
       [&](auto& f, auto& v) { o.max_queue_len = int(to_integer(f, v, 1, kMax)); }},
      {"max-request-body-bytes",
       [&](auto& f, auto& v) { o.max_request_body_bytes = to_integer(f, v, 1024, 1ll << 34); }},
      // Above 1,000 levels, what walks a value recursively could exhaust a thread's stack.
      {"max-json-depth",
       [&](auto& f, auto& v) { o.max_json_depth = int(to_integer(f, v, 1, 1000)); }},
      {"max-prompt-bytes-per-token",
       [&](auto& f, auto& v) { o.max_prompt_bytes_per_token = int(to_integer(f, v, 1, 4096)); }},
      {"drain-timeout", [&](auto& f, auto& v) { o.drain_timeout = to_number(f, v, 0, 86400); }},
      {"threads", [&](auto& f, auto& v) { o.threads = int(to_integer(f, v, 0, 1024)); }},
      {"http-threads", [&](auto& f, auto& v) { o.http_threads = int(to_integer(f, v, 1, 65536)); }},
      {"http-read-timeout",
       [&](auto& f, auto& v) { o.http_read_timeout = int(to_integer(f, v, 1, 3600)); }},
      {"max-pending-connections-per-client",
       [&](auto& f, auto& v) {
         o.max_pending_connections_per_client = int(to_integer(f, v, 1, 65536));
       }},
      {"tool-call-parser",
       [&](auto& f, auto& v) {
         o.tool_call_parser = one_of(f, v, {"hermes", "llama3_json", "mistral", "openai"});
       }},
      {"enable-auto-tool-choice",
       [&](auto& f, auto& v) { o.enable_auto_tool_choice = to_bool(f, v); }},
      {"exclude-tools-when-tool-choice-none",
       [&](auto& f, auto& v) { o.exclude_tools_when_tool_choice_none = to_bool(f, v); }},
      {"reasoning-parser",
       [&](auto& f, auto& v) {
         o.reasoning_parser = one_of(f, v, {"qwen3", "deepseek_r1", "openai_gptoss"});
       }},
      {"log-level",
       [&](auto& f, auto& v) {
         o.log_level = one_of(f, v, {"trace", "debug", "info", "warn", "error"});
       }},
      {"token-mask-overlap", [&](auto& f, auto& v) { o.token_mask_overlap = to_bool(f, v); }},
      {"access-log", [&](auto& f, auto& v) { o.access_log = to_bool(f, v); }},
      {"log-stats-interval",
       [&](auto& f, auto& v) { o.log_stats_interval = to_number(f, v, 0, 86400); }},
      {"token-mask-threads",
       [&](auto& f, auto& v) { o.token_mask_threads = int(to_integer(f, v, 1, 64)); }},
      {"speculative-config",
       [&](auto&, auto& v) { o.speculative = spec::parse_speculative_config(v); }},
  };
}

// A value flag of either table: serve's own, or the backends' tuning (backend_flags.h).
void set_value(std::map<std::string, Setter>& setters, ServeOptions& o, const std::string& name,
               const std::string& value) {
  if (auto it = setters.find(name); it != setters.end()) return it->second(name, value);
  if (const BackendFlag* flag = find_backend_flag(name)) return flag->set(o.backend, name, value);
  throw std::invalid_argument("unknown option --" + name + " (see --help)");
}

void apply_yaml(const std::string& path, ServeOptions& o) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument("--config " + path + ": " + e.what());
  }
  if (root.IsNull()) return;
  if (!root.IsMap())
    throw std::invalid_argument("--config " + path + ": expected a mapping of option: value");
  auto setters = value_flags(o);
  for (const auto& item : root) {
    std::string key = item.first.as<std::string>();
    std::replace(key.begin(), key.end(), '_', '-');
    if (!setters.contains(key) && find_backend_flag(key) == nullptr) {
      throw std::invalid_argument("--config " + path + ": unknown option '" + key +
                                  "' (see --help)");
    }
    if (!item.second.IsScalar()) {
      throw std::invalid_argument("--config " + path + ": '" + key + "' must be a single value");
    }
    set_value(setters, o, key, item.second.as<std::string>());
  }
}

}  // namespace

bool parse_serve_options(const std::vector<std::string>& args, ServeOptions& o) {
  if (const char* key = std::getenv("NIBBLE_API_KEY"); key != nullptr && *key != '\0')
    o.api_keys.push_back(key);
  // The file first, so that flags override it wherever they appear.
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) apply_yaml(args[i + 1], o);
    if (args[i].starts_with("--config=")) apply_yaml(args[i].substr(9), o);
  }
  auto setters = value_flags(o);
  std::string positional_model;
  for (std::size_t i = 1; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(serve_usage().c_str(), stdout);
      return false;
    }
    if (!arg.starts_with("--")) {  // `serve MODEL`, as vLLM users write it
      if (!positional_model.empty() || arg.empty())
        throw std::invalid_argument("unexpected argument '" + arg + "' (see --help)");
      positional_model = arg;
      continue;
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    // The shared table says which flags exist and which take a value (engine/cli/serve_flags.h).
    const ServeFlag* flag = find_serve_flag(name);
    if (flag == nullptr) throw std::invalid_argument("unknown option --" + name + " (see --help)");
    if (flag->value == FlagValue::kNone && has_value)
      throw std::invalid_argument("--" + name + " takes no value");
    if (flag->value == FlagValue::kRequired && !has_value) {
      if (i + 1 >= args.size()) throw std::invalid_argument("--" + name + " needs a value");
      value = args[++i];
    }
    if (name == "config") continue;  // read above, before every other flag
    if (name == "no-enable-prefix-caching") {
      o.enable_prefix_caching = false;
      continue;
    }
    if (name == "metrics-require-key" && !has_value) {
      o.metrics_require_key = true;
      continue;
    }
    if (name == "enable-prefix-caching" && !has_value) {
      o.enable_prefix_caching = true;
      continue;
    }
    if (name == "no-access-log") {
      o.access_log = false;
      continue;
    }
    if (name == "disable-log-stats") {
      o.log_stats_interval = 0;
      continue;
    }
    if (name == "enforce-eager" && !has_value) {
      o.enforce_eager = true;
      continue;
    }
    // Other switches that also take =VALUE (--enable-auto-tool-choice): present means on.
    if (flag->value == FlagValue::kOptional && !has_value) value = "true";
    set_value(setters, o, name, value);
  }
  if (!positional_model.empty()) {
    if (!o.model.empty() && o.model != positional_model) {
      throw std::invalid_argument("the model is given twice, as '" + positional_model +
                                  "' and --model '" + o.model + "': give one");
    }
    o.model = positional_model;
  }
  if (o.model.empty())
    throw std::invalid_argument("no model: pass `serve MODEL` or --model MODEL (see --help)");
  return true;
}

}  // namespace nibble::engine::cli

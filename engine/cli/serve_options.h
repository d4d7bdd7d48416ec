#pragma once
// `nibble-engine serve` options: vLLM's flag names where vLLM has the option, read from the
// command line and optionally from a YAML file (--config; keys are the long flag names, with
// dashes or underscores). The command line wins over the file. Every error names the flag.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend/backend_options.h"
#include "engine/spec/speculative_config.h"

namespace nibble::engine::cli {

// Default tokens per engine step. GPU: the best served throughput and tail latency of 1,024 to
// 8,192 (docs/performance.md, "Tokens per step"). CPU: a step there is slow, so smaller steps
// keep decodes flowing.
inline constexpr int kGpuStepTokens = 4096;
inline constexpr int kCpuStepTokens = 2048;

struct ServeOptions {
  // A model directory (Hugging Face layout), or a Hub id (org/name, hf://org/name[@revision])
  // found in the model cache or downloaded into it (engine/cli/model_argument.h). Either
  // --model or `serve MODEL`, the positional argument vLLM users pass.
  std::string model;
  std::string download_dir;  // the model cache; "" = nibble pull's ($NIBBLE_CACHE, ~/.cache/nibble)
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string served_model_name;  // default: the model directory's name
  int max_model_len = 0;          // 0: the model's max_position_embeddings
  int max_num_seqs = 256;
  // 0: the backend's default (kGpuStepTokens on a GPU, kCpuStepTokens on the CPU).
  int max_num_batched_tokens = 0;
  double gpu_memory_utilization = 0.9;
  std::string kv_cache_dtype = "auto";     // auto | bf16 | fp8
  std::int64_t kv_cache_memory_bytes = 0;  // 0: GPU from utilization; CPU 1 GiB
  bool enable_prefix_caching = true;
  std::vector<std::string> api_keys;       // --api-key (repeatable), also $NIBBLE_API_KEY
  std::vector<std::string> api_key_files;  // --api-key-file: one key per line
  bool metrics_require_key = false;        // /metrics needs a key too
  std::string device = "auto";             // auto | cpu | cuda
  bool enforce_eager = false;              // no CUDA graphs for decode steps
  std::string quantization;                // "" | nvfp4 (quantize a BF16 checkpoint at load)
  int max_queue_len = 1024;
  std::int64_t max_request_body_bytes = 32ll << 20;
  int max_json_depth = 128;             // server::RequestLimits::max_json_depth
  int max_prompt_bytes_per_token = 32;  // server::RequestLimits::max_prompt_bytes_per_token
  double drain_timeout = 30;            // seconds
  int threads = 0;                      // CPU backend threads, 0 = all cores
  int http_threads = 256;
  int http_read_timeout = 5;                   // seconds
  int max_pending_connections_per_client = 0;  // 0: a quarter of --http-threads
  // --allowed-origins as given: browser origins (comma-separated) whose pages may call the API
  // cross-origin; http::parse_origin_list splits it. Empty: none.
  std::string allowed_origins;
  std::string log_level = "info";
  bool access_log = true;          // a line per request (engine/server/access_log.h)
  double log_stats_interval = 10;  // seconds between stats lines; 0 = none (engine_stats_log.h)
  // Chat output parsing (vLLM's flags): "" = detect the tool-call format from the chat template.
  std::string tool_call_parser;
  bool enable_auto_tool_choice = false;
  bool exclude_tools_when_tool_choice_none = false;
  std::string reasoning_parser;  // "" = reasoning stays in content
  // Structured outputs' token masks (runtime::EngineConfig): overlapped with the forward pass,
  // on this many threads.
  bool token_mask_overlap = true;
  int token_mask_threads = 4;
  // --speculative-config (vLLM's JSON), checked when parsed; unset: no speculative decoding.
  std::optional<spec::SpeculativeConfig> speculative;
  // The backends' tuning (engine/cli/backend_flags.h); serve fills in device, threads and
  // graphs from the flags above.
  backend::BackendOptions backend;
};

// Returns false when --help was asked for (usage printed). Throws std::invalid_argument.
bool parse_serve_options(const std::vector<std::string>& args, ServeOptions& options);
// The --help text: every flag of serve_flags.h, the backends' tuning flags last.
const std::string& serve_usage();

}  // namespace nibble::engine::cli

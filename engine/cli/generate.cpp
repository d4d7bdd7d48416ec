// nibble-engine generate: greedy decoding from token ids on the CPU reference backend, printing
// one JSON line per step (token and top logits). A debugging entry point used by tests.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/backend/greedy_decode.h"
#include "engine/backend/sampled_decode.h"
#include "engine/backend/select_backend.h"
#include "engine/cli/backend_flags.h"
#include "engine/cli/commands.h"
#include "engine/model/model_weights.h"
#include "engine/model/quantize_on_load.h"

namespace nibble::engine::cli {
namespace {

constexpr const char* kUsage =
    R"(usage: nibble-engine generate --model DIR --prompt-ids 1,2,3 [options]

Greedy decoding on the CPU reference backend. Prints one JSON line per generated token:
  {"step": 0, "token": 42, "top": [[42, 3.51], [7, 3.12], ...]}
then a summary line with all tokens and timings.

  --model DIR       Hugging Face-layout model (BF16/F16/F32 or NVFP4 ModelOpt/compressed-tensors)
  --prompt-ids IDS  comma-separated token ids
  --max-tokens N    tokens to generate (default 16)
  --top-k K         logits to print per step (default 5)
  --threads N       CPU threads (default: all)
  --device D        auto (default: the GPU when there is one), cpu or cuda
  --quantization Q  none (default) or nvfp4: quantize a dense model's projections while loading
  --enforce-eager   no CUDA graphs for decode steps (to compare against them)
  --warmup          run the prompt once untimed first (one-time set-up out of the timings)
  --kv-cache-dtype T  auto (default), bf16 or fp8 (E4M3 with per-row scales, GPU only)
  --sample-on-device  pick each token on the device, as the server does (GPU only): only the
                    token and its log-probabilities reach the host, and each line prints
                    {"step": 0, "token": 42, "logprob": -0.4, "top_logprobs": [[42, -0.4], ...]}
                    (--top-k of them, at most 32) instead of logits

Tuning (serve's flags of the same names):
)";

std::vector<std::int32_t> parse_ids(const std::string& text) {
  std::vector<std::int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 0 || v > INT32_MAX)
      throw std::invalid_argument("--prompt-ids: '" + item + "' is not a token id");
    ids.push_back(std::int32_t(v));
  }
  if (ids.empty()) throw std::invalid_argument("--prompt-ids: no ids given");
  return ids;
}

}  // namespace

int run_generate(const Args& args) {
  std::string model_dir, prompt;
  std::string quantization = "none", kv_dtype = "auto";
  int max_tokens = 16, top_k = 5;
  bool warmup = false, on_device = false;
  backend::BackendOptions backend_options;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::fputs(backend_flags_usage().c_str(), stdout);
      return 0;
    }
    if (a == "--enforce-eager") {
      backend_options.cuda.graphs = false;
      continue;
    }
    if (a == "--warmup") {
      warmup = true;
      continue;
    }
    if (a == "--sample-on-device") {
      on_device = true;
      continue;
    }
    if (i + 1 >= args.size()) {
      std::fprintf(stderr, "generate: %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string& v = args[++i];
    if (const BackendFlag* flag = a.starts_with("--") ? find_backend_flag(a.substr(2)) : nullptr) {
      try {
        flag->set(backend_options, std::string(flag->name), v);
      } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "generate: %s\n", e.what());
        return 2;
      }
    } else if (a == "--model")
      model_dir = v;
    else if (a == "--prompt-ids")
      prompt = v;
    else if (a == "--max-tokens")
      max_tokens = std::stoi(v);
    else if (a == "--top-k")
      top_k = std::stoi(v);
    else if (a == "--device")
      backend_options.device = v;
    else if (a == "--threads")
      backend_options.cpu_threads = std::stoi(v);
    else if (a == "--quantization")
      quantization = v;
    else if (a == "--kv-cache-dtype")
      kv_dtype = v;
    else {
      std::fprintf(stderr, "generate: unknown option %s\n\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (model_dir.empty() || prompt.empty()) {
    std::fprintf(stderr, "generate: --model and --prompt-ids are required\n\n%s", kUsage);
    return 2;
  }
  if (max_tokens < 1) {
    std::fprintf(stderr, "generate: --max-tokens must be at least 1\n");
    return 2;
  }
  if (kv_dtype != "auto" && kv_dtype != "bf16" && kv_dtype != "fp8") {
    std::fprintf(stderr, "generate: --kv-cache-dtype must be auto, bf16 or fp8\n");
    return 2;
  }
  if (quantization != "none" && quantization != "nvfp4") {
    std::fprintf(stderr, "generate: --quantization must be none or nvfp4\n");
    return 2;
  }
  if (on_device && (top_k < 0 || top_k > kernels::kMaxSampledTopLogprobs)) {
    std::fprintf(stderr, "generate: --sample-on-device prints 0..%d log-probabilities (--top-k)\n",
                 kernels::kMaxSampledTopLogprobs);
    return 2;
  }
  const auto ids = parse_ids(prompt);
  auto weights = model::load_model(model_dir);
  if (quantization == "nvfp4")
    spdlog::info("quantized {} projections to NVFP4 while loading",
                 model::quantize_weights_nvfp4(weights));
  auto backend = backend::make_backend(backend_options, std::move(weights));
  if (kv_dtype != "auto" &&
      !backend->set_kv_cache_dtype(kv_dtype == "fp8" ? backend::KvCacheDtype::kFp8
                                                     : backend::KvCacheDtype::kBf16)) {
    std::fprintf(stderr, "generate: the %s backend cannot keep a %s KV cache for this model\n",
                 backend->name().c_str(), kv_dtype.c_str());
    return 2;
  }
  if (on_device && !backend->samples_on_device()) {
    std::fprintf(stderr, "generate: the %s backend does not sample on the device\n",
                 backend->name().c_str());
    return 2;
  }
  std::vector<std::int32_t> tokens;
  double prefill_seconds = 0, decode_seconds = 0, pick_seconds = 0;
  if (on_device) {
    if (warmup)
      (void)backend::greedy_decode_on_device(*backend, ids, std::min(max_tokens, 2), top_k);
    const auto trace = backend::greedy_decode_on_device(
        *backend, ids, max_tokens, top_k, [&](int step, const backend::SampledStep& s) {
          nlohmann::json top = nlohmann::json::array();
          for (const auto& t : s.top) top.push_back({t.token, t.logprob});
          nlohmann::json line = {
              {"step", step}, {"token", s.token}, {"logprob", s.logprob}, {"top_logprobs", top}};
          std::printf("%s\n", line.dump().c_str());
          std::fflush(stdout);
          tokens.push_back(s.token);
        });
    prefill_seconds = trace.prefill_seconds;
    decode_seconds = trace.decode_seconds;
  } else {
    if (warmup)
      (void)backend::greedy_decode(
          *backend, ids, std::min(max_tokens, 2), 0,
          [](int, const backend::StepLogits&, const std::vector<float>&) {});
    const auto trace = backend::greedy_decode(
        *backend, ids, max_tokens, top_k,
        [&](int step, const backend::StepLogits& s, const std::vector<float>&) {
          nlohmann::json top = nlohmann::json::array();
          for (const auto& [id, logit] : s.top) top.push_back({id, logit});
          nlohmann::json line = {{"step", step}, {"token", s.token}, {"top", top}};
          std::printf("%s\n", line.dump().c_str());
          std::fflush(stdout);
          tokens.push_back(s.token);
        });
    prefill_seconds = trace.prefill_seconds;
    decode_seconds = trace.decode_seconds;
    pick_seconds = trace.pick_seconds;
  }
  const double decode_rate = decode_seconds > 0 ? double(max_tokens - 1) / decode_seconds : 0.0;
  nlohmann::json summary = {{"tokens", tokens},
                            {"prompt_tokens", ids.size()},
                            {"sampling", on_device ? "device" : "host"},
                            {"prefill_seconds", prefill_seconds},
                            {"decode_tokens_per_second", decode_rate}};
  // The host path's decode time includes its picks over the full logits; this is their share.
  if (!on_device && max_tokens > 1)
    summary["host_pick_seconds_per_token"] = pick_seconds / double(max_tokens - 1);
  std::printf("%s\n", summary.dump().c_str());
  spdlog::info("prefill {} tokens in {:.3f} s; decode {:.2f} tokens/s ({} sampling)", ids.size(),
               prefill_seconds, decode_rate, on_device ? "device" : "host");
  return 0;
}

}  // namespace nibble::engine::cli

// nibble-engine serve: loads a model and serves it over the OpenAI-compatible API until SIGTERM
// or SIGINT, then drains (stops accepting, lets running requests finish for --drain-timeout).
#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/backend/backend_model_runner.h"
#include "engine/backend/select_backend.h"
#include "engine/chat/chat_template.h"
#include "engine/cli/commands.h"
#include "engine/cli/model_argument.h"
#include "engine/cli/serve_options.h"
#include "engine/model/eagle3_head.h"
#include "engine/model/model_weights.h"
#include "engine/model/quantize_on_load.h"
#include "engine/runtime/engine_loop.h"
#include "engine/server/engine_stats_log.h"
#include "engine/server/openai_server.h"
#include "engine/spec/draft_model_drafter.h"
#include "engine/spec/hidden_state_drafter.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tool_calls/harmony_parser.h"
#include "http/cors.h"
#include "metrics/registry.h"

namespace nibble::engine::cli {
namespace {

namespace fs = std::filesystem;
constexpr int kBlockSize = 16;
// The drafters' own KV caches (draft_model, mtp, eagle3) keep up to this many sequences (fewer
// with --max-num-seqs) of --max-model-len tokens each, allocated at start-up: --max-num-seqs' 256
// slots of a long context did not fit (Qwen3-Next's MTP layer at 262,144 tokens: 2 KiB a token,
// 128 GiB; 16 slots: 8 GiB). Past that, the least recently used sequence gives up its slot: a
// draft model recomputes its prefix (engine/spec/draft_model_drafter.h), a head drafts nothing
// more for it (engine/spec/hidden_state_drafter.h).
constexpr int kDraftSequences = 16;

// The chat output parsers: the flags, or the tool-call format the chat template shows.
server::ChatOutputConfig chat_output_config(const ServeOptions& o,
                                            const chat::ChatTemplate* chat_template) {
  server::ChatOutputConfig c;
  c.enable_auto_tool_choice = o.enable_auto_tool_choice;
  c.exclude_tools_when_tool_choice_none = o.exclude_tools_when_tool_choice_none;
  c.reasoning_format = reasoning::reasoning_format_from_name(o.reasoning_parser);
  // gpt-oss: one harmony parser reads reasoning, content and tool calls (vLLM's names for it).
  c.harmony = o.reasoning_parser == "openai_gptoss" || o.tool_call_parser == "openai" ||
              (o.reasoning_parser.empty() && o.tool_call_parser.empty() && chat_template &&
               tool_calls::is_harmony_template(chat_template->source()));
  if (c.harmony) {
    spdlog::info(
        "chat output: the harmony format (analysis -> reasoning_content, final -> "
        "content, functions.* -> tool_calls)");
    return c;
  }
  if (!o.tool_call_parser.empty()) {
    c.tool_call_format = tool_calls::tool_call_format_from_name(o.tool_call_parser);
  } else if (chat_template) {
    c.tool_call_format = tool_calls::detect_tool_call_format(chat_template->source());
    if (c.tool_call_format) {
      spdlog::info("tool calls: the chat template uses the {} format",
                   tool_calls::tool_call_format_name(*c.tool_call_format));
    }
  }
  if (c.enable_auto_tool_choice && !c.tool_call_format) {
    spdlog::warn(
        "--enable-auto-tool-choice without a tool-call format: the chat template shows none, so "
        "tool_choice \"auto\" will answer 400; pass --tool-call-parser");
  }
  return c;
}

// EOS ids from generation_config.json, then config.json (either may hold an int or a list).
std::vector<int> eos_token_ids(const fs::path& model_dir) {
  std::vector<int> ids;
  for (const char* name : {"generation_config.json", "config.json"}) {
    std::ifstream in(model_dir / name);
    if (!in) continue;
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_object() || !j.contains("eos_token_id")) continue;
    const nlohmann::json& e = j["eos_token_id"];
    if (e.is_number_integer()) ids.push_back(e.get<int>());
    if (e.is_array()) {
      for (const auto& v : e) {
        if (v.is_number_integer()) ids.push_back(v.get<int>());
      }
    }
    if (!ids.empty()) break;
  }
  return ids;
}

void set_log_level(const std::string& level) {
  spdlog::set_level(spdlog::level::from_str(level));
}

// SIGTERM and SIGINT are taken by one thread with sigwait; block them everywhere else first.
sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// The KV cache's capacity at start-up: tokens of context per GiB and full-length sequences at
// once, counted with the sliding group's bounded blocks where the model has windows.
void log_kv_capacity(const backend::Backend& backend, int num_blocks, int max_model_len,
                     int max_chunk) {
  const int window = backend.kv_sliding_window();
  const runtime::KvCapacity c = runtime::kv_capacity(backend.kv_block_bytes(kBlockSize), kBlockSize,
                                                     window, num_blocks, max_model_len, max_chunk);
  spdlog::info(
      "KV capacity: {:.0f} tokens of context per GiB, {} concurrent sequences of --max-model-len "
      "{} tokens{}",
      c.tokens_per_gib, c.max_full_length_sequences, max_model_len,
      window > 0 ? fmt::format(" (sliding layers keep their last {} tokens' blocks only)", window)
                 : std::string());
}

}  // namespace

int run_serve(const Args& args) {
  ServeOptions o;
  try {
    if (!parse_serve_options(args, o)) return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "serve: %s\n", e.what());
    return 2;
  }
  set_log_level(o.log_level);
  const sigset_t signals = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  bool on_gpu = false;
  try {
    on_gpu = backend::backend_uses_cuda(o.device);
  } catch (const std::exception& e) {
    spdlog::error("serve: {}", e.what());
    return 2;
  }
  // The model, and a draft model, as a directory or a Hub id in the model cache.
  const auto resolve = [&o](const std::string& argument) {
    const fs::path cache =
        o.download_dir.empty() ? source::default_model_cache_dir() : fs::path(o.download_dir);
    return resolve_model_argument(argument, {cache, source::download_options_from_env()});
  };
  LocalModel local;
  try {
    local = resolve(o.model);
  } catch (const std::exception& e) {
    spdlog::error("serve: {}", e.what());
    return 1;
  }
  const fs::path model_dir = local.dir;
  if (o.served_model_name.empty()) o.served_model_name = local.hub_id;  // as vLLM names it
  if (o.served_model_name.empty())
    o.served_model_name = model_dir.lexically_normal().filename().string();
  if (o.served_model_name.empty())
    o.served_model_name = fs::absolute(model_dir).parent_path().filename().string();

  const auto load_start = std::chrono::steady_clock::now();
  spdlog::info("loading {} ...", model_dir.string());
  model::ModelWeights weights = model::load_model(model_dir);
  if (o.quantization == "nvfp4") {
    spdlog::info("quantized {} projections to NVFP4 while loading",
                 model::quantize_weights_nvfp4(weights));
  }
  // mtp: the model's own multi-token-prediction module, taken out of its weights before they
  // go to the backend.
  std::optional<model::ModelWeights> mtp_module;
  if (o.speculative && o.speculative->method == spec::SpecMethod::kMtp) {
    if (!weights.mtp) {
      spdlog::error(
          "serve: --speculative-config: mtp: {} has no multi-token-prediction module (no mtp.* "
          "weights in its checkpoint; Qwen3-Next checkpoints carry one); use ngram or "
          "draft_model",
          model_dir.string());
      return 2;
    }
    mtp_module = model::take_mtp_module(weights);
  }
  // eagle3: the head, loaded against the target's weights (its embedding, its sizes), which are
  // then set to hand out the inputs of the layers the head reads.
  std::optional<model::ModelWeights> eagle3_head;
  if (o.speculative && o.speculative->method == spec::SpecMethod::kEagle3) {
    try {
      const fs::path head_dir = resolve(o.speculative->model).dir;
      spdlog::info("loading the EAGLE-3 head {} ...", head_dir.string());
      eagle3_head = model::load_eagle3_head(head_dir, weights);
      weights.config.hidden_state_layers =
          model::eagle3_target_layers(*eagle3_head->config.eagle3, weights.config.num_layers);
      spdlog::info("EAGLE-3: the head reads the inputs of the target's layers {}, {} and {}",
                   weights.config.hidden_state_layers[0], weights.config.hidden_state_layers[1],
                   weights.config.hidden_state_layers[2]);
    } catch (const std::exception& e) {
      spdlog::error("serve: --speculative-config: eagle3: {}", e.what());
      return 2;
    }
  }
  const int model_context = weights.config.max_context;
  backend::BackendOptions backend_options = o.backend;
  backend_options.device = on_gpu ? "cuda" : "cpu";
  backend_options.cpu_threads = o.threads;
  backend_options.cuda.graphs = !o.enforce_eager;
  auto backend = backend::make_backend(backend_options, std::move(weights));
  if (o.speculative && !backend->logits_at_several_positions()) {
    spdlog::error(
        "serve: --speculative-config: the {} backend does not verify drafts of {} (it returns "
        "logits at one position per sequence); speculative decoding runs on the CPU and CUDA "
        "backends",
        backend->name(), backend->config().architecture);
    return 2;
  }
  const int max_model_len = o.max_model_len > 0 ? o.max_model_len : model_context;
  const int draft_sequences = std::min(o.max_num_seqs, kDraftSequences);
  // draft_model: loaded now, before the target's KV cache is sized, so that on a GPU its weights
  // and KV cache count against --gpu-memory-utilization's budget.
  std::shared_ptr<const spec::Drafter> draft_model;
  // mtp and eagle3: a draft head on the target's hidden states, on a backend of its own.
  if (mtp_module || eagle3_head) {
    const char* method = mtp_module ? "mtp" : "eagle3";
    try {
      if (!backend->returns_hidden_states())
        throw spec::SpeculativeConfigError(
            std::string("--speculative-config: ") + method + ": the " + backend->name() +
            " backend does not hand its hidden states to a drafter, which " + method +
            " drafts are made from; " + method + " runs on the CPU and CUDA backends");
      std::vector<int> draft_to_target;
      if (eagle3_head) draft_to_target = std::move(eagle3_head->eagle3->draft_to_target);
      // The head's steps carry hidden_in, which decode graphs do not read: it runs eagerly.
      backend::BackendOptions head_options = backend_options;
      head_options.cuda.graphs = false;
      auto drafter = std::make_shared<spec::HiddenStateDrafter>(
          backend::make_backend(head_options, std::move(mtp_module ? *mtp_module : *eagle3_head)),
          spec::HiddenStateDrafterOptions{.max_sequences = draft_sequences,
                                          .max_tokens_per_sequence = max_model_len,
                                          .block_size = kBlockSize},
          std::move(draft_to_target));
      spdlog::info(
          "{}: the head's KV cache keeps {} sequences of {} tokens ({:.2f} MiB, least recently "
          "used evicted: it drafts no more for a sequence it evicted)",
          method, draft_sequences, max_model_len, double(drafter->kv_bytes()) / double(1 << 20));
      // The head's KV cache is its own, not in the prefix cache: it has nothing for a cached
      // prefix (hybrid models cache no prefixes anyway).
      if (eagle3_head && o.enable_prefix_caching && backend->state_slot_bytes() == 0)
        spdlog::warn(
            "eagle3: a prompt that hits the prefix cache gets no drafts (the head has no hidden "
            "states for the cached prefix); --no-enable-prefix-caching drafts for every request");
      draft_model = std::move(drafter);
    } catch (const std::exception& e) {
      spdlog::error("serve: {}", e.what());
      return 2;
    }
  }
  if (o.speculative && o.speculative->method == spec::SpecMethod::kDraftModel) {
    try {
      const fs::path draft_dir = resolve(o.speculative->model).dir;
      spdlog::info("loading the draft model {} ...", draft_dir.string());
      backend::BackendOptions draft_options = backend_options;
      draft_options.cuda.graphs = false;  // the draft runs one sequence per step, eagerly
      const spec::DraftModelOptions draft_shape{.max_sequences = draft_sequences,
                                                .max_tokens_per_sequence = max_model_len,
                                                .block_size = kBlockSize};
      auto drafter = std::make_shared<spec::DraftModelDrafter>(
          backend::make_backend(draft_options, model::load_model(draft_dir)),
          backend->config().vocab_size, draft_shape);
      spdlog::info(
          "draft model: {} layers, vocab {}; its KV cache keeps {} sequences of {} tokens "
          "({:.2f} MiB, least recently used evicted)",
          drafter->config().num_layers, drafter->config().vocab_size, drafter->max_sequences(),
          drafter->max_tokens_per_sequence(), double(drafter->kv_bytes()) / double(1 << 20));
      draft_model = std::move(drafter);
    } catch (const std::exception& e) {
      spdlog::error("serve: {}", e.what());
      return 2;
    }
  }
  if (o.max_num_batched_tokens == 0)
    o.max_num_batched_tokens = on_gpu ? kGpuStepTokens : kCpuStepTokens;
  if (o.kv_cache_dtype != "auto" &&
      !backend->set_kv_cache_dtype(o.kv_cache_dtype == "fp8" ? backend::KvCacheDtype::kFp8
                                                             : backend::KvCacheDtype::kBf16)) {
    spdlog::warn("--kv-cache-dtype {}: the {} backend keeps its KV cache in {} for this model",
                 o.kv_cache_dtype, backend->name(), backend->kv_cache_dtype());
  }
  const auto& config = backend->config();
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_directory(model_dir);
  std::unique_ptr<chat::ChatTemplate> chat_template;
  try {
    chat_template = std::make_unique<chat::ChatTemplate>(chat::load_tokenizer_config(model_dir));
  } catch (const std::exception& e) {
    spdlog::warn("no usable chat template ({}); /v1/chat/completions will answer 400", e.what());
  }
  spdlog::info(
      "loaded {} layers, vocab {}, in {:.1f} s", config.num_layers, config.vocab_size,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());

  if (max_model_len > model_context) {
    spdlog::error("serve: --max-model-len {} exceeds the model's context of {}", max_model_len,
                  model_context);
    return 2;
  }
  // An explicit size wins; a GPU gets what --gpu-memory-utilization leaves after the weights and
  // the activations of the largest step; the CPU backend 1 GiB.
  std::size_t kv_bytes = std::size_t(o.kv_cache_memory_bytes);
  if (kv_bytes == 0)
    kv_bytes = backend->device_memory_for_kv(
        o.gpu_memory_utilization, o.max_num_batched_tokens, o.max_num_seqs,
        o.speculative ? o.speculative->num_speculative_tokens + 1 : 1);
  if (kv_bytes == 0 && !on_gpu) kv_bytes = std::size_t(1) << 30;
  // A hybrid model's recurrent state: one slot per running sequence, out of the same budget.
  const int state_slots = backend->state_slot_bytes() > 0 ? o.max_num_seqs : 0;
  // With speculative decoding a slot also keeps its state after each of a verify step's k + 1
  // tokens, to roll back past rejected drafts (engine/backend/cpu/cpu_kv_cache.h).
  const int kept_per_slot = o.speculative ? o.speculative->num_speculative_tokens + 1 : 0;
  const std::size_t kept_bytes =
      std::size_t(state_slots) * std::size_t(kept_per_slot) * backend->state_slot_bytes();
  const std::size_t state_bytes =
      std::size_t(state_slots) * backend->state_slot_bytes() + kept_bytes;
  if (state_slots > 0) {
    if (kept_bytes > 0)
      spdlog::info(
          "recurrent state rollback for speculative decoding: {} kept states per slot, {:.2f} "
          "MiB at most",
          kept_per_slot, double(kept_bytes) / double(1 << 20));
    if (state_bytes >= kv_bytes) {
      spdlog::error(
          "serve: {} recurrent-state slots of {:.2f} MiB (one per --max-num-seqs sequence, "
          "with the states speculative decoding keeps) need {} MiB, more than the KV cache budget "
          "of {} MiB; lower --max-num-seqs or raise "
          "--kv-cache-memory-bytes",
          state_slots, double(backend->state_slot_bytes()) / double(1 << 20), state_bytes >> 20,
          kv_bytes >> 20);
      return 2;
    }
    spdlog::info(
        "recurrent state: {} slots of {:.2f} MiB (one per --max-num-seqs sequence), {} "
        "MiB of the KV cache budget with the kept states",
        state_slots, double(backend->state_slot_bytes()) / double(1 << 20), state_bytes >> 20);
    kv_bytes -= state_bytes;
  }
  const int num_blocks = backend::kv_blocks_for_budget(
      *backend, kv_bytes, kBlockSize, max_model_len, o.max_num_seqs, o.max_num_batched_tokens);
  // The budget is a ceiling: no more blocks than max-num-seqs full-length sequences can hold.
  if (const std::size_t budget_blocks = kv_bytes / backend->kv_block_bytes(kBlockSize);
      budget_blocks > std::size_t(num_blocks)) {
    const char* budget = o.kv_cache_memory_bytes > 0 ? "--kv-cache-memory-bytes"
                         : on_gpu                    ? "--gpu-memory-utilization's budget"
                                                     : "the CPU budget";
    spdlog::info(
        "KV cache: {} of {} MiB holds {} blocks; using {} blocks ({} MiB), as many as "
        "--max-num-seqs {} sequences of --max-model-len {} tokens can fill",
        budget, kv_bytes >> 20, budget_blocks, num_blocks,
        (std::size_t(num_blocks) * backend->kv_block_bytes(kBlockSize)) >> 20, o.max_num_seqs,
        max_model_len);
  }
  spdlog::info("KV cache: {} blocks of {} tokens ({} tokens, {} MiB, {})", num_blocks, kBlockSize,
               num_blocks * kBlockSize,
               (std::size_t(num_blocks) * backend->kv_block_bytes(kBlockSize)) >> 20,
               backend->kv_cache_dtype());
  log_kv_capacity(*backend, num_blocks, max_model_len, o.max_num_batched_tokens);
  backend::BackendModelRunner runner(*backend, num_blocks, kBlockSize, state_slots);

  runtime::EngineConfig engine_config;
  engine_config.model_name = o.served_model_name;
  engine_config.max_model_len = max_model_len;
  engine_config.max_queue_len = o.max_queue_len;
  engine_config.enable_prefix_caching = o.enable_prefix_caching;
  engine_config.scheduler = {.max_num_seqs = o.max_num_seqs,
                             .max_num_batched_tokens = o.max_num_batched_tokens};
  engine_config.eos_token_ids = eos_token_ids(model_dir);
  engine_config.overlap_token_masks = o.token_mask_overlap;
  engine_config.token_mask_threads = o.token_mask_threads;
  if (o.speculative) {
    engine_config.drafter = draft_model ? draft_model : spec::make_drafter(*o.speculative);
    engine_config.num_speculative_tokens = o.speculative->num_speculative_tokens;
    if (o.speculative->method == spec::SpecMethod::kMtp)
      spdlog::info(
          "speculative decoding: mtp drafts of up to {} tokens from the model's MTP module",
          o.speculative->num_speculative_tokens);
    else if (draft_model)
      spdlog::info("speculative decoding: {} drafts of up to {} tokens from {}",
                   spec::method_name(o.speculative->method), o.speculative->num_speculative_tokens,
                   o.speculative->model);
    else
      spdlog::info("speculative decoding: {} drafts of up to {} tokens (prompt lookup {}..{})",
                   spec::method_name(o.speculative->method), o.speculative->num_speculative_tokens,
                   o.speculative->prompt_lookup_min, o.speculative->prompt_lookup_max);
  }
  metrics::Registry& registry = metrics::default_registry();
  registry
      .gauge("nibble_build_info", "Build information; the value is always 1.",
             {"version", "backend", "model_name"})
      .labels({NIBBLE_VERSION, backend->name(), o.served_model_name})
      .set(1);
  runtime::EngineLoop engine(engine_config, runner, registry);

  server::ServerConfig server_config;
  server_config.host = o.host;
  server_config.port = o.port;
  server_config.served_model_name = o.served_model_name;
  try {
    for (const std::string& key : o.api_keys) server_config.api_keys.add(key);
    for (const std::string& file : o.api_key_files) server_config.api_keys.add_file(file);
  } catch (const std::exception& e) {
    spdlog::error("serve: {}", e.what());
    return 2;
  }
  server_config.metrics_require_key = o.metrics_require_key;
  server_config.read_timeout = std::chrono::seconds(o.http_read_timeout);
  server_config.max_pending_connections_per_client = o.max_pending_connections_per_client;
  server_config.max_body_bytes = std::size_t(o.max_request_body_bytes);
  server_config.http_threads = o.http_threads;
  server_config.allowed_origins = http::parse_origin_list(o.allowed_origins);
  server_config.limits.max_json_depth = o.max_json_depth;
  server_config.limits.max_prompt_bytes_per_token = o.max_prompt_bytes_per_token;
  server_config.chat_output = chat_output_config(o, chat_template.get());
  server_config.access_log = o.access_log;
  server::OpenAiServer server(server_config, engine, tokenizer, chat_template.get(), registry);
  const int port = server.bind();
  server.prepare_structured_outputs_in_background();
  engine.start();
  server::EngineStatsLog stats_log(
      registry, o.served_model_name, max_model_len,
      std::chrono::milliseconds(std::int64_t(o.log_stats_interval * 1000)));
  server.set_ready(true);
  spdlog::info("serving '{}' on http://{}:{}/v1 (backend {}, max model len {})",
               o.served_model_name, o.host, port, backend->name(), max_model_len);

  std::thread shutdown([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    spdlog::info("received {}: draining for up to {:.0f} s",
                 signal == SIGTERM ? "SIGTERM" : "SIGINT", o.drain_timeout);
    const std::chrono::milliseconds drain(std::int64_t(o.drain_timeout * 1000));
    const auto deadline = std::chrono::steady_clock::now() + drain;
    engine.drain_and_stop(drain);
    // The engine has finished; the last chunks of its streams may still be on their way out.
    if (!server.wait_for_streams(deadline)) {
      spdlog::warn("drain timeout: closing {} streams still being written",
                   server.streams_in_flight());
    }
    server.stop();
  });
  server.listen();
  shutdown.join();
  spdlog::info("stopped");
  return 0;
}

}  // namespace nibble::engine::cli

#include "engine/runtime/engine_loop.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <random>

#include "engine/runtime/penalty_list.h"
#include "engine/spec/verify.h"

namespace nibble::runtime {

struct EngineLoop::ActiveRequest {
  GenerationRequest request;
  std::vector<std::unique_ptr<Sequence>> sequences;  // one per choice (n)
  std::vector<SamplerRng> rngs;
  std::vector<PenaltyList> penalties;                                     // per choice
  std::vector<std::unique_ptr<structured::TokenConstraint>> constraints;  // per choice, or empty
  std::vector<Clock::time_point> last_token_time;
  Clock::time_point first_scheduled{}, first_token{}, last_token{};
  bool scheduled = false;
  bool got_first_token = false;
  int num_finished = 0;
  FinishReason reason = FinishReason::kNone;  // of the request as a whole
};

namespace {

std::uint64_t choice_seed(const SamplingParams& params, int choice) {
  if (!params.seed) return std::random_device{}() ^ (std::uint64_t(std::random_device{}()) << 32);
  // Distinct, reproducible streams for each of the n choices of a seeded request.
  std::uint64_t z = *params.seed + 0x9e3779b97f4a7c15ull * std::uint64_t(choice + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// A hybrid model's recurrent state covers the whole sequence so far, so a KV prefix found in
// the cache would come without the state after it: prefix caching is off for such models.
// (Sliding-window layers keep it: KvBlockPool takes a hit only as far as their window is cached.)
bool prefix_caching(const EngineConfig& config, const ModelRunner& runner) {
  if (!config.enable_prefix_caching) return false;
  if (runner.num_state_slots() > 0) {
    spdlog::info(
        "prefix caching off: the model keeps a recurrent state per sequence (linear attention), "
        "which a cached KV prefix does not carry");
    return false;
  }
  return true;
}

std::unique_ptr<StateSlotPool> state_slots(const ModelRunner& runner) {
  if (runner.num_state_slots() == 0) return nullptr;
  return std::make_unique<StateSlotPool>(runner.num_state_slots());
}

}  // namespace

EngineLoop::EngineLoop(EngineConfig config, ModelRunner& runner, metrics::Registry& registry)
    : config_(std::move(config)),
      runner_(runner),
      metrics_(registry, config_.model_name, std::max(config_.max_model_len, 1)),
      pool_(runner.num_kv_blocks(), runner.kv_block_size(), prefix_caching(config_, runner),
            runner.kv_sliding_window()),
      slots_(state_slots(runner)),
      scheduler_(config_.scheduler, pool_, slots_.get()) {
  config_.token_mask_threads = std::clamp(config_.token_mask_threads, 1, 64);
  if (slots_ && slots_->num_slots() < config_.scheduler.max_num_seqs)
    throw std::invalid_argument("the model runner has " + std::to_string(slots_->num_slots()) +
                                " recurrent-state slots for max_num_seqs " +
                                std::to_string(config_.scheduler.max_num_seqs));
  if (slots_) metrics_.add_state_slots(registry, slots_->num_slots());
  if (config_.drafter) {
    // Hybrid models too: a backend that verifies drafts rolls a state slot back to the accepted
    // length when the next step starts there (backend.h, BatchItem::state_slot).
    if (config_.num_speculative_tokens < 1)
      throw std::invalid_argument("speculative decoding needs num_speculative_tokens >= 1");
    if (!runner_.verifies_drafts())
      throw std::invalid_argument(
          "speculative decoding needs a backend that returns logits at several positions of a "
          "sequence (ModelRunner::verifies_drafts); this one does not");
    if (config_.drafter->reads_hidden_states()) {
      try {
        runner_.keep_hidden_states();
      } catch (const std::logic_error& e) {
        throw std::invalid_argument(std::string("speculative decoding (") +
                                    std::string(config_.drafter->name()) + "): " + e.what());
      }
    }
    spec_metrics_ = std::make_unique<SpecDecodeMetrics>(registry, config_.model_name,
                                                        config_.num_speculative_tokens);
  }
}

EngineLoop::~EngineLoop() {
  drain_and_stop(std::chrono::milliseconds(0));
}

void EngineLoop::start() {
  thread_ = std::thread([this] { run(); });
}

int EngineLoop::max_tokens_per_sequence() const {
  return std::min(config_.max_model_len,
                  pool_.max_tokens_per_sequence(config_.scheduler.max_num_batched_tokens));
}

SubmitResult EngineLoop::submit(GenerationRequest request) {
  if (!accepting_) return {SubmitStatus::kNotAccepting, "the engine is shutting down"};
  const int limit = max_tokens_per_sequence();
  if (request.prompt.empty() || int(request.prompt.size()) >= limit) {
    return {SubmitStatus::kInvalid, "prompt has " + std::to_string(request.prompt.size()) +
                                        " tokens; it must have at least 1 and fewer than " +
                                        std::to_string(limit)};
  }
  const int vocab = runner_.vocab_size();
  for (int id : request.prompt) {
    if (id < 0 || id >= vocab) {
      return {SubmitStatus::kInvalid, "token id " + std::to_string(id) +
                                          " is outside the model's vocabulary of " +
                                          std::to_string(vocab)};
    }
  }
  {
    std::lock_guard lock(inbox_mutex_);
    if (int(inbox_.size()) + unscheduled_requests_.load() >= config_.max_queue_len) {
      return {SubmitStatus::kQueueFull,
              "the request queue is full (" + std::to_string(config_.max_queue_len) + " waiting)"};
    }
    request.arrival = Clock::now();
    inbox_.push_back(std::move(request));
  }
  inbox_ready_.notify_one();
  return {};
}

void EngineLoop::drain_and_stop(std::chrono::milliseconds timeout) {
  accepting_ = false;
  drain_deadline_ = Clock::now() + timeout;
  draining_ = true;
  inbox_ready_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EngineLoop::run() {
  spdlog::info(
      "engine loop started: {} KV blocks of {} tokens, max {} sequences, {} tokens per step",
      pool_.num_blocks(), pool_.block_size(), config_.scheduler.max_num_seqs,
      config_.scheduler.max_num_batched_tokens);
  if (pool_.sliding_window() > 0)
    spdlog::info("sliding-window KV: blocks leaving the window of {} tokens return to the pool",
                 pool_.sliding_window());
  while (true) {
    admit_inbox();
    drop_cancelled();
    if (draining_ && scheduler_.idle()) break;
    if (draining_ && Clock::now() >= drain_deadline_) {
      abort_everything(FinishReason::kAbort, "the engine shut down before the request finished");
      break;
    }
    if (scheduler_.idle()) {
      update_gauges();  // the last requests may just have been dropped
      std::unique_lock lock(inbox_mutex_);
      inbox_ready_.wait_for(lock, std::chrono::milliseconds(50),
                            [this] { return !inbox_.empty() || draining_.load(); });
      continue;
    }
    execute_step();
    erase_finished_requests();
    update_gauges();
  }
  admit_inbox();
  abort_everything(FinishReason::kAbort, "the engine shut down before the request finished");
  update_gauges();
  spdlog::info("engine loop stopped");
}

void EngineLoop::admit_inbox() {
  std::deque<GenerationRequest> incoming;
  {
    std::lock_guard lock(inbox_mutex_);
    incoming.swap(inbox_);
    unscheduled_requests_ += int(incoming.size());
  }
  for (GenerationRequest& request : incoming) {
    auto active = std::make_unique<ActiveRequest>();
    const int n = std::max(1, request.params.n);
    for (int choice = 0; choice < n; ++choice) {
      auto seq = std::make_unique<Sequence>();
      seq->id = next_sequence_id_++;
      seq->tokens = request.prompt;
      seq->num_prompt_tokens = int(request.prompt.size());
      seq->params = request.params;
      owner_[seq->id] = {active.get(), choice};
      scheduler_.add(*seq);
      active->rngs.emplace_back(choice_seed(request.params, choice));
      active->penalties.emplace_back(request.params);
      if (request.constraint) active->constraints.push_back(request.constraint->start());
      active->sequences.push_back(std::move(seq));
    }
    active->last_token_time.resize(std::size_t(n));
    active->request = std::move(request);
    const std::string id = active->request.id;
    requests_[id] = std::move(active);
  }
}

void EngineLoop::drop_cancelled() {
  for (auto& [id, request] : requests_) {
    OutputChannel& channel = *request->request.channel;
    for (int choice : channel.take_stopped_choices()) {  // stop strings found by the consumer
      if (choice < 0 || choice >= int(request->sequences.size())) continue;
      Sequence& seq = *request->sequences[std::size_t(choice)];
      if (seq.status != SequenceStatus::kFinished) finish_sequence(seq, FinishReason::kStop);
    }
    if (!channel.cancelled()) continue;
    for (auto& seq : request->sequences) {
      if (seq->status != SequenceStatus::kFinished) finish_sequence(*seq, FinishReason::kAbort);
    }
  }
  erase_finished_requests();
}

void EngineLoop::propose_drafts() {
  const int vocab = runner_.vocab_size();
  for (auto& [id, request] : requests_) {
    for (auto& seq : request->sequences) {
      seq->draft_tokens.clear();
      if (!request->constraints.empty() || seq->status != SequenceStatus::kRunning ||
          seq->num_computed_tokens != seq->num_tokens() - 1)
        continue;
      const int room = std::min(seq->params.max_tokens - seq->num_output_tokens(),
                                max_tokens_per_sequence() - seq->num_tokens()) -
                       1;
      const int k = std::min(config_.num_speculative_tokens, room);
      if (k <= 0) continue;
      config_.drafter->propose_for(seq->id, seq->tokens, k, seq->draft_tokens);
      if (int(seq->draft_tokens.size()) > k) seq->draft_tokens.resize(std::size_t(k));
      // A drafter's token outside the vocabulary ends the draft there (the model cannot run it).
      auto bad = std::find_if(seq->draft_tokens.begin(), seq->draft_tokens.end(),
                              [vocab](int t) { return t < 0 || t >= vocab; });
      seq->draft_tokens.erase(bad, seq->draft_tokens.end());
    }
  }
}

void EngineLoop::execute_step() {
  if (config_.drafter) propose_drafts();
  SchedulerOutput out = scheduler_.schedule();
  if (out.empty()) {
    // Nothing fits although nothing runs: the first waiting sequence can never be scheduled.
    if (scheduler_.num_running() == 0) {
      if (Sequence* stuck = scheduler_.first_waiting()) {
        finish_sequence(*stuck, FinishReason::kError, "the prompt does not fit in the KV cache");
      }
    }
    return;
  }
  // Counted before this step's tokens go out, so a client that reads /metrics right after its
  // answer sees its own request's prefix-cache hits.
  fold_counters();
  const Clock::time_point scheduled_at = Clock::now();
  for (const ScheduledSequence& s : out.scheduled) {
    ActiveRequest& request = *owner_.at(s.seq->id).first;
    if (!request.scheduled) {
      request.scheduled = true;
      request.first_scheduled = scheduled_at;
      --unscheduled_requests_;
    }
  }

  // Where each sequence's positions began this step (hidden states handed to the drafter).
  std::vector<int> starts;
  for (const ScheduledSequence& s : out.scheduled) starts.push_back(s.seq->num_computed_tokens);
  // Masks depend only on the tokens sampled so far, so they can be computed while the forward
  // pass runs: the runner calls fill_token_masks once the device has the step.
  const bool masked = prepare_token_masks(out);
  const bool overlap = masked && config_.overlap_token_masks;
  if (masked && !overlap) fill_token_masks(out);
  DeviceSamples device;
  const bool on_device = prepare_device_sampling(out, device);
  std::vector<float> logits;
  try {
    const ModelRunner::HostWork masks = [&] { fill_token_masks(out); };
    if (on_device && overlap)
      runner_.execute_sampled_overlapping(out, device.requests, masks);
    else if (on_device)
      runner_.execute_sampled(out, device.requests);
    else if (overlap)
      runner_.execute_overlapping(out, logits, masks);
    else
      runner_.execute(out, logits);
  } catch (const std::exception& e) {
    spdlog::error("model step failed: {}", e.what());
    for (const ScheduledSequence& s : out.scheduled) {
      if (s.seq->status == SequenceStatus::kRunning) {
        finish_sequence(*s.seq, FinishReason::kError,
                        std::string("model step failed: ") + e.what());
      }
    }
    return;
  }

  const int vocab = runner_.vocab_size();
  // Each sampling sequence's tokens this step: one, or with drafts the accepted drafts and the
  // target's own token (spec/verify.h).
  std::vector<std::vector<SampledToken>> samples(out.scheduled.size());
  std::size_t row = 0;       // logits or device-sampling row: num_logits() per sampling sequence
  std::size_t mask_row = 0;  // token-mask row: one per sampling sequence
  for (std::size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledSequence& s = out.scheduled[i];
    if (!s.samples_next_token) continue;
    auto [request, choice] = owner_.at(s.seq->id);
    const std::size_t first_row = row, seq_mask_row = mask_row++;
    row += std::size_t(s.num_logits());
    std::span<const std::uint32_t> allowed;
    if (!out.token_bitmask.empty() && out.token_bitmask.constrained[seq_mask_row]) {
      allowed = out.token_bitmask.row(seq_mask_row);
      if (structured::bitmask_count(allowed) == 0) {
        finish_sequence(*s.seq, FinishReason::kError,
                        "the structured output's grammar allows no next token");
        continue;
      }
    }
    SamplerRng& rng = request->rngs[std::size_t(choice)];
    std::vector<SampledToken>& tokens = samples[i];
    const std::span<const int> all(s.seq->tokens);
    const auto prompt = all.first(std::size_t(s.seq->num_prompt_tokens));
    std::vector<int> output;
    if (!on_device) output.assign(all.begin() + s.seq->num_prompt_tokens, all.end());
    // The target's token at draft position j, drawn as without speculation: the logits of that
    // position, the penalties of the tokens before it, the next random draw. On the device every
    // row was drawn so (prepare_device_sampling); the rows past the first mismatch are dropped,
    // and the random stream advances by the draws used, as on the host.
    const auto target_token = [&](int j) {
      const std::size_t r = first_row + std::size_t(j);
      if (on_device) {
        tokens.push_back(device.take(r));
        rng.advance();
      } else {
        const std::span<const float> row_logits(logits.data() + r * std::size_t(vocab),
                                                std::size_t(vocab));
        tokens.push_back(sample_token(row_logits, s.seq->params, prompt, output, rng, allowed));
        output.push_back(tokens.back().token);
      }
      return tokens.back().token;
    };
    const int accepted = spec::accept_drafts(
        std::span(s.seq->draft_tokens).first(std::size_t(s.num_draft_tokens)), target_token);
    if (s.num_draft_tokens > 0) spec_metrics_->count(s.num_draft_tokens, accepted);
    if (!allowed.empty() && !request->constraints[std::size_t(choice)]->advance(tokens[0].token)) {
      // Cannot happen for a token the mask allowed; guards against a backend that ignores it.
      spdlog::error("request {}: sampled token {} breaks its structured output grammar",
                    request->request.id, tokens[0].token);
      finish_sequence(*s.seq, FinishReason::kError,
                      "the sampled token does not fit the structured output's grammar");
      tokens.clear();
    }
  }

  // Where each sequence stops: at the first token that ends it (EOS, a stop token, max_tokens,
  // the context), whose later tokens, accepted drafts included, are dropped.
  std::vector<std::vector<int>> emitted(out.scheduled.size());
  std::vector<FinishReason> reasons(out.scheduled.size(), FinishReason::kNone);
  std::vector<bool> stop_token(out.scheduled.size(), false);
  for (std::size_t i = 0; i < out.scheduled.size(); ++i) {
    const Sequence& seq = *out.scheduled[i].seq;
    if (seq.status != SequenceStatus::kRunning) continue;
    const SamplingParams& p = seq.params;
    for (std::size_t j = 0; j < samples[i].size(); ++j) {
      const int token = samples[i][j].token;
      emitted[i].push_back(token);
      const bool is_eos =
          !p.ignore_eos && std::find(config_.eos_token_ids.begin(), config_.eos_token_ids.end(),
                                     token) != config_.eos_token_ids.end();
      const bool is_stop_id = std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) !=
                              p.stop_token_ids.end();
      const int num_output = seq.num_output_tokens() + int(j) + 1;
      if (is_eos || is_stop_id)
        reasons[i] = FinishReason::kStop;
      else if (num_output >= p.max_tokens ||
               seq.num_tokens() + int(j) + 1 >= max_tokens_per_sequence())
        reasons[i] = FinishReason::kLength;
      if (reasons[i] != FinishReason::kNone) {
        stop_token[i] = is_eos || is_stop_id;
        samples[i].resize(j + 1);
        break;
      }
    }
  }
  scheduler_.complete_step(out, emitted);
  if (config_.drafter && config_.drafter->reads_hidden_states()) observe_hidden_states(out, starts);

  const Clock::time_point now = Clock::now();
  for (std::size_t i = 0; i < out.scheduled.size(); ++i) {
    Sequence& seq = *out.scheduled[i].seq;
    if (emitted[i].empty() || seq.status != SequenceStatus::kRunning) continue;
    auto [request, choice] = owner_.at(seq.id);
    const int outputs_before = seq.num_output_tokens() - int(emitted[i].size());
    for (std::size_t j = 0; j < emitted[i].size(); ++j) {
      metrics_.generation_tokens.inc();
      if (!request->got_first_token) {
        request->got_first_token = true;
        request->first_token = now;
        metrics_.time_to_first_token.observe(seconds(now - request->request.arrival));
        metrics_.request_prefill_time.observe(seconds(now - request->first_scheduled));
        metrics_.prompt_tokens.inc(double(request->request.prompt.size()));
      } else if (j == 0 && outputs_before >= 1) {
        // Once per step: the tokens of one verify step arrive together.
        metrics_.inter_token_latency.observe(
            seconds(now - request->last_token_time[std::size_t(choice)]));
      }
      const bool last = j + 1 == emitted[i].size();
      TokenEvent event;
      event.choice = choice;
      event.token = emitted[i][j];
      event.sample = std::move(samples[i][j]);
      event.finish = last ? reasons[i] : FinishReason::kNone;
      event.stop_token = last && stop_token[i];
      event.num_prompt_tokens = seq.num_prompt_tokens;
      event.num_cached_prompt_tokens = seq.num_cached_prompt_tokens;
      request->request.channel->push(std::move(event));
    }
    request->last_token_time[std::size_t(choice)] = now;
    request->last_token = now;
    if (reasons[i] != FinishReason::kNone) finish_sequence(seq, reasons[i]);
  }
}

void EngineLoop::observe_hidden_states(const SchedulerOutput& out, const std::vector<int>& starts) {
  const std::span<const float> hidden = runner_.hidden_states();
  const std::size_t H = std::size_t(runner_.hidden_size());
  std::size_t row = 0;
  for (std::size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledSequence& s = out.scheduled[i];
    const std::size_t first = row;
    row += std::size_t(s.num_new_tokens);
    // The rows whose tokens the sequence kept: all of a prompt chunk's, a verify step's
    // accepted prefix (the KV the target keeps).
    const int kept = s.seq->num_computed_tokens - starts[i];
    if (s.seq->status != SequenceStatus::kRunning || kept <= 0) continue;
    config_.drafter->observe(s.seq->id, s.seq->tokens, starts[i],
                             hidden.subspan(first * H, std::size_t(kept) * H));
  }
}

SampledToken EngineLoop::DeviceSamples::take(std::size_t row) {
  SampledToken t;
  t.token = results[row].token;
  if (logprobs[row] >= 0) {
    t.logprob = results[row].logprob;
    for (int j = 0; j < logprobs[row]; ++j) {
      const kernels::TopLogprob& e = top[row * kernels::kMaxSampledTopLogprobs + std::size_t(j)];
      t.top_logprobs.push_back({e.token, e.logprob});
    }
  }
  return t;
}

bool EngineLoop::prepare_device_sampling(const SchedulerOutput& out, DeviceSamples& device) {
  if (!runner_.samples_on_device()) return false;
  std::size_t rows = 0;
  for (const ScheduledSequence& s : out.scheduled) {
    if (!s.samples_next_token) continue;
    rows += std::size_t(s.num_logits());
    // More top logprobs than the device pass returns: this step samples on the host.
    if (s.seq->params.logprobs > kernels::kMaxSampledTopLogprobs) return false;
    // A constrained verify row's mask depends on the drafts before it, which the step's one
    // mask per sequence does not follow: such a step verifies on the host (the engine drafts
    // for no constrained request today).
    if (s.num_draft_tokens > 0 && !owner_.at(s.seq->id).first->constraints.empty()) return false;
  }
  if (rows == 0) return false;
  device.requests.resize(rows);
  device.results.assign(rows, {});
  device.top.assign(rows * kernels::kMaxSampledTopLogprobs, {});
  device.logprobs.assign(rows, -1);
  device.penalties.resize(rows);
  std::size_t row = 0, mask_row = 0;
  for (const ScheduledSequence& s : out.scheduled) {
    if (!s.samples_next_token) continue;
    auto [request, choice] = owner_.at(s.seq->id);
    PenaltyList& penalties = request->penalties[std::size_t(choice)];
    penalties.update(s.seq->tokens, s.seq->num_prompt_tokens);
    const SamplerRng& rng = request->rngs[std::size_t(choice)];
    const std::span<const int> drafts =
        std::span(s.seq->draft_tokens).first(std::size_t(s.num_draft_tokens));
    // Row j: the target's token at draft position j, as the host path draws it (spec/verify.h):
    // penalties of the tokens so far and drafts [0, j), the random stream j draws on.
    for (int j = 0; j < s.num_logits(); ++j, ++row) {
      kernels::SamplingRequest& r = device.requests[row];
      r.params = sampling_row(s.seq->params, rng);
      r.params.position += std::uint64_t(j);
      r.params.num_top_logprobs = std::min(r.params.num_top_logprobs, runner_.vocab_size());
      r.penalties = penalties.entries();
      if (j > 0 && penalties.any()) {
        penalties.entries_with_output(drafts.first(std::size_t(j)), device.penalties[row]);
        r.penalties = device.penalties[row];
      }
      r.bitmask = {};
      if (!out.token_bitmask.empty() && out.token_bitmask.constrained[mask_row])
        r.bitmask = out.token_bitmask.row(mask_row);
      r.result = &device.results[row];
      r.top = std::span(device.top)
                  .subspan(row * kernels::kMaxSampledTopLogprobs,
                           std::size_t(r.params.num_top_logprobs));
      device.logprobs[row] = s.seq->params.logprobs < 0 ? -1 : r.params.num_top_logprobs;
    }
    ++mask_row;
  }
  return true;
}

bool EngineLoop::prepare_token_masks(SchedulerOutput& out) {
  structured::TokenBitmaskBatch& batch = out.token_bitmask;
  std::size_t rows = 0;
  bool any = false;
  for (const ScheduledSequence& s : out.scheduled) {
    if (!s.samples_next_token) continue;
    ++rows;
    any = any || !owner_.at(s.seq->id).first->constraints.empty();
  }
  if (!any) return false;
  batch.words = structured::bitmask_words(std::size_t(runner_.vocab_size()));
  batch.bits.assign(rows * batch.words, 0xffffffffu);
  batch.constrained.assign(rows, false);
  std::size_t row = 0;
  for (const ScheduledSequence& s : out.scheduled) {
    if (!s.samples_next_token) continue;
    if (!owner_.at(s.seq->id).first->constraints.empty()) {
      std::fill_n(batch.bits.begin() + std::ptrdiff_t(row * batch.words), batch.words, 0u);
      batch.constrained[row] = true;
    }
    ++row;
  }
  return true;
}

void EngineLoop::fill_token_masks(SchedulerOutput& out) {
  structured::TokenBitmaskBatch& batch = out.token_bitmask;
  struct Job {
    structured::TokenConstraint* constraint;
    std::span<std::uint32_t> mask;
    double seconds = 0;
  };
  std::vector<Job> jobs;
  std::size_t row = 0;
  for (const ScheduledSequence& s : out.scheduled) {
    if (!s.samples_next_token) continue;
    if (batch.constrained[row]) {
      auto [request, choice] = owner_.at(s.seq->id);
      jobs.push_back({request->constraints[std::size_t(choice)].get(),
                      {batch.bits.data() + row * batch.words, batch.words}});
    }
    ++row;
  }
  // Each constraint is one sequence's own state; masks they share are cached under a lock.
  auto fill = [&jobs](std::int64_t begin, std::int64_t end) {
    for (std::int64_t j = begin; j < end; ++j) {
      Job& job = jobs[std::size_t(j)];
      const Clock::time_point start = Clock::now();
      try {
        job.constraint->fill_mask(job.mask);
      } catch (const std::exception& e) {
        spdlog::error("structured output: computing a token mask failed: {}", e.what());
        std::fill(job.mask.begin(), job.mask.end(), 0u);
      }
      job.seconds = seconds(Clock::now() - start);
    }
  };
  if (jobs.size() > 1 && config_.token_mask_threads > 1) {
    if (!token_mask_pool_)
      token_mask_pool_ = std::make_unique<ThreadPool>(config_.token_mask_threads);
    token_mask_pool_->parallel_for(std::int64_t(jobs.size()), fill);
  } else {
    fill(0, std::int64_t(jobs.size()));
  }
  for (const Job& job : jobs) metrics_.structured_mask_time.observe(job.seconds);
}

void EngineLoop::finish_sequence(Sequence& seq, FinishReason reason, const std::string& error) {
  auto [request, choice] = owner_.at(seq.id);
  scheduler_.finish(seq);
  if (config_.drafter) config_.drafter->forget(seq.id);
  ++request->num_finished;
  if (reason == FinishReason::kAbort || reason == FinishReason::kError) {
    TokenEvent event;
    event.choice = choice;
    event.finish = reason;
    event.error = error;
    event.num_prompt_tokens = seq.num_prompt_tokens;
    request->request.channel->push(std::move(event));
  }
  // A request is as good as its worst choice: an error or abort of one marks the request.
  if (request->reason == FinishReason::kNone || reason == FinishReason::kError ||
      reason == FinishReason::kAbort) {
    request->reason = reason;
  }
  if (!request->scheduled && request->num_finished == int(request->sequences.size())) {
    request->scheduled = true;  // leaves the queue count without ever running
    --unscheduled_requests_;
  }
}

void EngineLoop::erase_finished_requests() {
  for (auto it = requests_.begin(); it != requests_.end();) {
    ActiveRequest& r = *it->second;
    if (r.num_finished < int(r.sequences.size())) {
      ++it;
      continue;
    }
    const Clock::time_point end = r.got_first_token ? r.last_token : Clock::now();
    metrics_.e2e_request_latency.observe(seconds(end - r.request.arrival));
    if (r.first_scheduled != Clock::time_point{}) {
      metrics_.request_queue_time.observe(seconds(r.first_scheduled - r.request.arrival));
    }
    if (r.got_first_token)
      metrics_.request_decode_time.observe(seconds(r.last_token - r.first_token));
    metrics_.request_prompt_tokens.observe(double(r.request.prompt.size()));
    int generated = 0;
    for (const auto& seq : r.sequences) generated += seq->num_output_tokens();
    metrics_.request_generation_tokens.observe(double(generated));
    metrics_.count_finished(finish_reason_name(r.reason));
    for (const auto& seq : r.sequences) owner_.erase(seq->id);
    it = requests_.erase(it);
  }
}

void EngineLoop::abort_everything(FinishReason reason, const std::string& error) {
  for (auto& [id, request] : requests_) {
    for (auto& seq : request->sequences) {
      if (seq->status != SequenceStatus::kFinished) finish_sequence(*seq, reason, error);
    }
  }
  erase_finished_requests();
}

void EngineLoop::update_gauges() {
  int running = 0, waiting = 0;
  for (const auto& [id, request] : requests_) {
    bool any_running = false, any_waiting = false;
    for (const auto& seq : request->sequences) {
      any_running |= seq->status == SequenceStatus::kRunning;
      any_waiting |= seq->status == SequenceStatus::kWaiting;
    }
    running += any_running;
    waiting += !any_running && any_waiting;
  }
  {
    std::lock_guard lock(inbox_mutex_);
    waiting += int(inbox_.size());
  }
  metrics_.requests_running.set(running);
  metrics_.requests_waiting.set(waiting);
  metrics_.kv_cache_usage_ratio.set(pool_.usage());
  if (slots_) metrics_.state_slots_used->set(slots_->num_slots() - slots_->num_free());
  fold_counters();
}

void EngineLoop::fold_counters() {
  const PrefixCacheStats& stats = pool_.prefix_stats();
  metrics_.prefix_cache_queries.inc(double(stats.queried_tokens - reported_prefix_.queried_tokens));
  metrics_.prefix_cache_hits.inc(double(stats.hit_tokens - reported_prefix_.hit_tokens));
  reported_prefix_ = stats;
  metrics_.preemptions.inc(double(scheduler_.num_preemptions() - reported_preemptions_));
  reported_preemptions_ = scheduler_.num_preemptions();
}

}  // namespace nibble::runtime

#include "engine/backend/backend_model_runner.h"

#include <algorithm>
#include <string>

#include "engine/runtime/kv_block_pool.h"

namespace nibble::backend {

BackendModelRunner::BackendModelRunner(Backend& backend, int num_blocks, int block_size,
                                       int state_slots)
    : backend_(backend),
      cache_(backend.new_kv_cache_with_state(num_blocks, block_size, state_slots)) {
  backend_.prepare_decode(*cache_);
}

void BackendModelRunner::keep_hidden_states() {
  if (!backend_.returns_hidden_states())
    throw std::logic_error("the " + backend_.name() +
                           " backend does not return hidden states, which the mtp and eagle3 "
                           "methods need");
  keep_hidden_ = true;
}

void BackendModelRunner::execute(const runtime::SchedulerOutput& batch,
                                 std::vector<float>& logits) {
  run_to_logits(batch, logits, nullptr);
}

void BackendModelRunner::execute_sampled(const runtime::SchedulerOutput& batch,
                                         std::span<const kernels::SamplingRequest> requests) {
  run(batch, {}, requests);
}

void BackendModelRunner::execute_overlapping(const runtime::SchedulerOutput& batch,
                                             std::vector<float>& logits,
                                             const HostWork& host_work) {
  run_to_logits(batch, logits, &host_work);
}

void BackendModelRunner::run_to_logits(const runtime::SchedulerOutput& batch,
                                       std::vector<float>& logits, const HostWork* host_work) {
  std::size_t rows = 0;
  for (const auto& s : batch.scheduled) rows += std::size_t(s.num_logits());
  logits.assign(rows * std::size_t(vocab_size()), 0.0f);
  run(batch, logits, {}, host_work);
}

void BackendModelRunner::execute_sampled_overlapping(
    const runtime::SchedulerOutput& batch, std::span<const kernels::SamplingRequest> requests,
    const HostWork& host_work) {
  run(batch, {}, requests, &host_work);
}

void BackendModelRunner::run(const runtime::SchedulerOutput& batch, std::span<float> logits,
                             std::span<const kernels::SamplingRequest> requests,
                             const HostWork* host_work) {
  const std::size_t vocab = std::size_t(vocab_size());
  std::vector<BatchItem> items;
  items.reserve(batch.scheduled.size());
  const std::size_t H = std::size_t(backend_.config().hidden_state_width());
  std::size_t hidden_row = 0;
  if (keep_hidden_) {
    std::size_t tokens = 0;
    for (const runtime::ScheduledSequence& s : batch.scheduled)
      tokens += std::size_t(s.num_new_tokens);
    hidden_.assign(tokens * H, 0.0f);
  }
  // A decode row with drafts runs its last token and its drafts as one chunk.
  std::vector<std::vector<std::int32_t>> chunks;
  chunks.reserve(batch.scheduled.size());
  std::size_t row = 0;
  for (const runtime::ScheduledSequence& s : batch.scheduled) {
    const runtime::Sequence& seq = *s.seq;
    BatchItem item;
    if (s.num_draft_tokens > 0) {
      std::vector<std::int32_t>& chunk = chunks.emplace_back();
      for (int p = seq.num_computed_tokens; p < seq.num_computed_tokens + s.num_new_tokens; ++p)
        chunk.push_back(seq.token_at(p));
      item.tokens = chunk;
    } else {
      item.tokens = std::span<const std::int32_t>(seq.tokens.data() + seq.num_computed_tokens,
                                                  std::size_t(s.num_new_tokens));
    }
    item.start = seq.num_computed_tokens;
    item.block_table = seq.block_table;
    item.window_block_table = seq.window_block_table;
    item.state_slot = seq.state_slot;
    if (keep_hidden_) {
      item.hidden_out =
          std::span(hidden_).subspan(hidden_row * H, std::size_t(s.num_new_tokens) * H);
      hidden_row += std::size_t(s.num_new_tokens);
    }
    if (s.samples_next_token) {
      item.num_logits = s.num_logits();
      const std::size_t n = std::size_t(item.num_logits);
      if (!logits.empty())
        item.logits = logits.subspan(vocab * row, vocab * n);
      else if (row + n <= requests.size())
        item.sample = &requests[row];  // num_logits consecutive requests (backend.h)
      row += n;
    }
    items.push_back(item);
  }
  const std::size_t rows = logits.empty() ? requests.size() : logits.size() / vocab;
  if (row != rows)
    throw BackendError("the step has " + std::to_string(row) + " rows to sample, not " +
                       std::to_string(rows));
  if (host_work != nullptr)
    backend_.forward_batch_overlapping(*cache_, items, *host_work);
  else
    backend_.forward_batch(*cache_, items);
}

int kv_blocks_for_budget(const Backend& backend, std::size_t memory_bytes, int block_size,
                         int max_model_len, int max_num_seqs, int max_chunk) {
  const std::size_t block_bytes = backend.kv_block_bytes(block_size);
  const std::size_t per_sequence = std::size_t(runtime::kv_blocks_per_sequence(
      max_model_len, block_size, backend.kv_sliding_window(), max_chunk));
  const std::size_t fit = memory_bytes / block_bytes;
  if (fit < per_sequence) {
    throw BackendError("the KV cache budget of " + std::to_string(memory_bytes >> 20) +
                       " MiB holds " + std::to_string(fit) + " blocks of " +
                       std::to_string(block_size) + " tokens, fewer than one sequence of " +
                       "--max-model-len " + std::to_string(max_model_len) + " needs (" +
                       std::to_string(per_sequence) +
                       "); raise --kv-cache-memory-bytes or lower --max-model-len");
  }
  return int(std::min(fit, per_sequence * std::size_t(max_num_seqs)));
}

}  // namespace nibble::backend

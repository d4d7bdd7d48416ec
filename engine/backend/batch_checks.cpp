#include "engine/backend/batch_checks.h"

#include <algorithm>
#include <vector>

namespace nibble::backend {

void check_forward_args(const model::ModelConfig& c, const std::string& backend, int length,
                        int capacity, std::span<const std::int32_t> tokens,
                        std::span<const float> logits) {
  if (tokens.empty()) throw BackendError(backend + " backend: forward needs at least one token");
  if (length + std::int64_t(tokens.size()) > capacity)
    throw BackendError(backend + " backend: " + std::to_string(tokens.size()) + " tokens after " +
                       std::to_string(length) + " exceed the sequence capacity " +
                       std::to_string(capacity));
  if (logits.size() != std::size_t(c.vocab_size))
    throw BackendError(backend + " backend: logits buffer holds " + std::to_string(logits.size()) +
                       " floats, vocab_size is " + std::to_string(c.vocab_size));
}

namespace {

void check_sample(const model::ModelConfig& c, const std::string& who, const DeviceSampling& s) {
  const kernels::SamplingRow& p = s.params;
  if (s.result == nullptr) throw BackendError(who + "a device sampling request has no result");
  if (p.num_top_logprobs < 0 || p.num_top_logprobs > kernels::kMaxSampledTopLogprobs ||
      s.top.size() < std::size_t(p.num_top_logprobs))
    throw BackendError(
        who + "device sampling returns 0.." + std::to_string(kernels::kMaxSampledTopLogprobs) +
        " top logprobs into a buffer that holds them, not " + std::to_string(p.num_top_logprobs));
  if (!s.bitmask.empty() && s.bitmask.size() != (std::size_t(c.vocab_size) + 31) / 32)
    throw BackendError(who + "a token bitmask of " + std::to_string(s.bitmask.size()) +
                       " words for a vocabulary of " + std::to_string(c.vocab_size));
  if (s.penalties.size() > std::size_t(INT32_MAX))
    throw BackendError(who + "a penalty list longer than 2^31 entries");
}

// The sliding table: as long as the full one, valid ids from the first row's window on; the
// entries before it are never read, so they are not checked.
void check_window_table(const std::string& who, const KvCache& cache, const BatchItem& item,
                        std::int64_t end) {
  const int window = cache.sliding_window();
  if (window == 0) {
    if (!item.window_block_table.empty())
      throw BackendError(who + "a sliding-window block table for a cache of one block group");
    return;
  }
  if (std::int64_t(item.window_block_table.size()) * cache.block_size() < end)
    throw BackendError(who + "a sliding-window block table of " +
                       std::to_string(item.window_block_table.size()) + " blocks cannot hold " +
                       std::to_string(end) + " positions");
  const std::size_t first = std::size_t(std::max(0, item.start - window + 1) / cache.block_size());
  for (std::size_t i = first; i < item.window_block_table.size(); ++i) {
    const int b = item.window_block_table[i];
    if (b < 0 || b >= cache.num_blocks())
      throw BackendError(who + "sliding-window block " + std::to_string(i) + " (id " +
                         std::to_string(b) + ") inside the window of position " +
                         std::to_string(item.start) + " is outside the cache's " +
                         std::to_string(cache.num_blocks()) + " blocks");
  }
}

}  // namespace

std::int64_t check_batch(const model::ModelConfig& c, const std::string& backend,
                         const KvCache& cache, std::span<const BatchItem> items,
                         bool device_sampling, bool several_logits, bool hidden_states) {
  const std::string who = backend + " backend: ";
  const std::size_t H = std::size_t(c.hidden_size);
  std::int64_t total = 0;
  bool any_logits = false, any_sample = false;
  for (const BatchItem& item : items) {
    if (item.tokens.empty()) throw BackendError(who + "a batch item has no tokens");
    const std::int64_t end = std::int64_t(item.start) + std::int64_t(item.tokens.size());
    if (item.start < 0 || end > c.max_context)
      throw BackendError(who + "positions up to " + std::to_string(end) +
                         " exceed the model's context of " + std::to_string(c.max_context));
    if (std::int64_t(item.block_table.size()) * cache.block_size() < end)
      throw BackendError(who + "a block table of " + std::to_string(item.block_table.size()) +
                         " blocks cannot hold " + std::to_string(end) + " positions");
    for (int b : item.block_table)
      if (b < 0 || b >= cache.num_blocks())
        throw BackendError(who + "block id " + std::to_string(b) + " outside the cache's " +
                           std::to_string(cache.num_blocks()) + " blocks");
    check_window_table(who, cache, item, end);
    if (item.num_logits != 1 && !several_logits)
      throw BackendError(who + "returns logits at one position per sequence, not " +
                         std::to_string(item.num_logits) + " (no speculative decoding)");
    if (item.num_logits < 1 || std::size_t(item.num_logits) > item.tokens.size())
      throw BackendError(who + "logits at " + std::to_string(item.num_logits) +
                         " positions of a chunk of " + std::to_string(item.tokens.size()));
    if (!item.logits.empty() &&
        item.logits.size() != std::size_t(item.num_logits) * std::size_t(c.logits_size()))
      throw BackendError(who + "logits buffer holds " + std::to_string(item.logits.size()) +
                         " floats for " + std::to_string(item.num_logits) + " positions of " +
                         std::to_string(c.logits_size()) + " logits");
    if (item.sample != nullptr) {
      if (!device_sampling) throw BackendError(who + "does not sample on the device");
      if (!item.logits.empty())
        throw BackendError(who + "a batch item asks for both logits and device sampling");
      for (const DeviceSampling& s : samples_of(item)) check_sample(c, who, s);
    }
    if ((!item.hidden_out.empty() || !item.hidden_in.empty()) && !hidden_states)
      throw BackendError(who +
                         "does not return or take hidden states (the mtp and eagle3 methods)");
    const std::size_t T = item.tokens.size();
    const std::size_t width = std::size_t(c.hidden_state_width());
    if (!item.hidden_out.empty() && item.hidden_out.size() != T * width)
      throw BackendError(who + "hidden_out holds " + std::to_string(item.hidden_out.size()) +
                         " floats for " + std::to_string(T) + " tokens of " +
                         std::to_string(width) + " floats of hidden state");
    // An MTP module takes a hidden state per token; an EAGLE-3 head the target's three (which
    // its fc reduces) or its own (hidden_size), one width for all of an item's tokens.
    const bool hidden_in_fits =
        c.mtp_module ? item.hidden_in.size() == T * H
        : c.eagle3   ? item.hidden_in.size() == T * H ||
                         item.hidden_in.size() == T * std::size_t(c.eagle3->fc_inputs())
                   : item.hidden_in.empty();
    if (!hidden_in_fits)
      throw BackendError(
          who + "hidden_in holds " + std::to_string(item.hidden_in.size()) +
          " floats; the model takes " +
          (c.mtp_module ? std::to_string(T * H) + " (a hidden state per token, an MTP module)"
           : c.eagle3   ? std::to_string(T * H) + " or " +
                            std::to_string(T * std::size_t(c.eagle3->fc_inputs())) +
                            " (an EAGLE-3 head: its own hidden state or the target's three "
                            "per token)"
                      : std::string("none")));
    any_logits |= !item.logits.empty();
    any_sample |= item.sample != nullptr;
    if (any_logits && any_sample)
      throw BackendError(who + "a step samples every row on the device or none");
    for (auto t : item.tokens)
      if (t < 0 || t >= c.vocab_size)
        throw BackendError(who + "token id " + std::to_string(t) + " outside vocabulary of " +
                           std::to_string(c.vocab_size));
    total += std::int64_t(item.tokens.size());
  }
  return total;
}

void check_state_slots(const std::string& backend, const KvCache& cache,
                       std::span<const BatchItem> items, bool needs_state) {
  const std::string who = backend + " backend: ";
  std::vector<int> slots;
  for (const BatchItem& item : items) {
    if (!needs_state) {
      if (item.state_slot != -1)
        throw BackendError(who +
                           "the model keeps no recurrent state; a batch item names state "
                           "slot " +
                           std::to_string(item.state_slot));
      continue;
    }
    if (item.state_slot < 0 || item.state_slot >= cache.num_state_slots())
      throw BackendError(who + "the model keeps a recurrent state per sequence; state slot " +
                         std::to_string(item.state_slot) + " is outside the cache's " +
                         std::to_string(cache.num_state_slots()) + " slots");
    slots.push_back(item.state_slot);
  }
  std::sort(slots.begin(), slots.end());
  if (std::adjacent_find(slots.begin(), slots.end()) != slots.end())
    throw BackendError(who + "two batch items share a state slot");
}

}  // namespace nibble::backend

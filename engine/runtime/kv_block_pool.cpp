#include "engine/runtime/kv_block_pool.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>
#include <string>

namespace nibble::runtime {
namespace {
constexpr std::uint64_t kRootHash = 0x9e3779b97f4a7c15ull;

// Sliding blocks a step of up to max_chunk tokens can see: the window before its first row, the
// chunk, and one block straddling the window's start.
int window_blocks_cap(int block_size, int sliding_window, int max_chunk) {
  return int((std::int64_t(sliding_window) - 1 + max_chunk + block_size - 1) / block_size) + 1;
}
}  // namespace

int kv_blocks_per_sequence(int num_tokens, int block_size, int sliding_window, int max_chunk) {
  const int full = (num_tokens + block_size - 1) / block_size;
  if (sliding_window <= 0) return full;
  return full + std::min(full, window_blocks_cap(block_size, sliding_window, max_chunk));
}

KvCapacity kv_capacity(std::size_t block_bytes, int block_size, int sliding_window, int num_blocks,
                       int max_model_len, int max_chunk) {
  const int per_sequence =
      kv_blocks_per_sequence(max_model_len, block_size, sliding_window, max_chunk);
  KvCapacity c;
  c.tokens_per_gib = double(max_model_len) * double(std::size_t(1) << 30) /
                     (double(per_sequence) * double(block_bytes));
  c.max_full_length_sequences = num_blocks / per_sequence;
  return c;
}

KvBlockPool::KvBlockPool(int num_blocks, int block_size, bool enable_prefix_caching,
                         int sliding_window)
    : block_size_(block_size),
      prefix_caching_(enable_prefix_caching),
      sliding_window_(sliding_window),
      blocks_(std::size_t(std::max(num_blocks, 0))) {
  if (num_blocks <= 0 || block_size <= 0) {
    throw std::invalid_argument("KV cache needs at least one block of at least one token, got " +
                                std::to_string(num_blocks) + " blocks of " +
                                std::to_string(block_size));
  }
  if (sliding_window < 0)
    throw std::invalid_argument("KV cache: a sliding window must be >= 0, got " +
                                std::to_string(sliding_window));
  for (int id = 0; id < num_blocks; ++id) {
    blocks_[std::size_t(id)].free_pos = free_list_.insert(free_list_.end(), id);
    blocks_[std::size_t(id)].in_free_list = true;
  }
}

std::uint64_t KvBlockPool::chain_hash(std::uint64_t parent, const int* tokens, int count) {
  std::uint64_t h = parent;
  for (int i = 0; i < count; ++i) {
    h ^= std::uint64_t(std::uint32_t(tokens[i])) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
  }
  return h;
}

int KvBlockPool::cached_block(const std::unordered_map<std::uint64_t, int>& cache, std::uint64_t h,
                              const int* block_tokens) const {
  auto it = cache.find(h);
  if (it == cache.end()) return -1;
  const Block& block = blocks_[std::size_t(it->second)];
  if (!std::equal(block.tokens.begin(), block.tokens.end(), block_tokens)) return -1;
  return it->second;
}

KvBlockPool::PrefixHit KvBlockPool::match_prefix(const Sequence& seq) const {
  PrefixHit hit;
  if (!prefix_caching_) return hit;
  // The last token is always computed: its logits pick the next token.
  const int max_blocks = std::max(0, (seq.num_tokens() - 1) / block_size_);
  std::uint64_t parent = kRootHash;
  for (int i = 0; i < max_blocks; ++i) {
    const int* block_tokens = seq.tokens.data() + std::ptrdiff_t(i) * block_size_;
    const std::uint64_t h = chain_hash(parent, block_tokens, block_size_);
    const int id = cached_block(cached_, h, block_tokens);
    if (id < 0) break;
    hit.full.push_back(id);
    if (sliding_window_ > 0) hit.sliding.push_back(cached_block(sliding_cached_, h, block_tokens));
    parent = h;
  }
  if (sliding_window_ == 0) return hit;
  // The longest n whose window, blocks first_window_block(n * size) .. n - 1, the sliding group
  // still has: held[i] counts the cached sliding blocks in a row ending at block i.
  std::vector<int> held(hit.sliding.size());
  for (std::size_t i = 0; i < held.size(); ++i)
    held[i] = hit.sliding[i] < 0 ? 0 : (i == 0 ? 0 : held[i - 1]) + 1;
  int n = int(hit.full.size());
  while (n > 0 && held[std::size_t(n - 1)] < n - first_window_block(n * block_size_)) --n;
  hit.full.resize(std::size_t(n));
  hit.sliding.resize(std::size_t(n));
  for (int i = 0; i < first_window_block(n * block_size_); ++i)
    hit.sliding[std::size_t(i)] = kFreedBlock;  // left the window: not taken, whether cached or not
  return hit;
}

int KvBlockPool::num_held_blocks(const Sequence& seq) const {
  return int(seq.block_table.size()) +
         int(std::count_if(seq.window_block_table.begin(), seq.window_block_table.end(),
                           [](int id) { return id != kFreedBlock; }));
}

int KvBlockPool::max_tokens_per_sequence(int max_chunk) const {
  const int blocks = num_blocks();
  if (sliding_window_ == 0) return blocks * block_size_;
  // Up to `cap` blocks a sequence holds as many sliding blocks as full ones, beyond that `cap`
  // sliding blocks at most.
  const int cap = window_blocks_cap(block_size_, sliding_window_, max_chunk);
  const int full = blocks - cap > cap ? blocks - cap : std::min(cap, blocks / 2);
  return full * block_size_;
}

int KvBlockPool::window_blocks_to_free(const Sequence& seq, int start) const {
  const int end = std::min(first_window_block(start), int(seq.window_block_table.size()));
  int n = 0;
  for (int i = 0; i < end; ++i) {
    const int id = seq.window_block_table[std::size_t(i)];
    // A block a prefix hit shares stays with its other holders: only a last reference frees.
    n += id != kFreedBlock && blocks_[std::size_t(id)].ref_count == 1;
  }
  return n;
}

void KvBlockPool::grow_tables(Sequence& seq, int total) {
  if (sliding_window_ > 0) {
    const int end =
        std::min(first_window_block(seq.num_computed_tokens), int(seq.window_block_table.size()));
    for (int i = 0; i < end; ++i) {
      int& id = seq.window_block_table[std::size_t(i)];
      if (id == kFreedBlock) continue;
      release(id);
      id = kFreedBlock;
    }
  }
  while (int(seq.block_table.size()) < total) seq.block_table.push_back(take_free_block());
  if (sliding_window_ > 0)
    while (int(seq.window_block_table.size()) < total)
      seq.window_block_table.push_back(take_free_block());
}

int KvBlockPool::cached_prefix_tokens(const Sequence& seq) const {
  if (!seq.block_table.empty()) return 0;
  return match_prefix(seq).tokens(block_size_);
}

bool KvBlockPool::can_allocate(const Sequence& seq, int num_new_tokens) const {
  const PrefixHit hit = match_prefix(seq);
  const int matched = int(hit.full.size());
  const int total = blocks_for_tokens(hit.tokens(block_size_) + num_new_tokens);
  int free_needed = total - matched;
  for (int id : hit.full) free_needed += blocks_[std::size_t(id)].ref_count == 0 ? 1 : 0;
  if (sliding_window_ > 0) {
    free_needed += total - matched;
    for (int id : hit.sliding)
      if (id != kFreedBlock) free_needed += blocks_[std::size_t(id)].ref_count == 0 ? 1 : 0;
  }
  return free_needed <= num_free_blocks();
}

void KvBlockPool::reference(int block_id) {
  Block& block = blocks_[std::size_t(block_id)];
  if (block.in_free_list) {
    free_list_.erase(block.free_pos);
    block.in_free_list = false;
  }
  ++block.ref_count;
}

int KvBlockPool::take_free_block() {
  if (free_list_.empty()) throw std::logic_error("KV block pool: allocation without a free block");
  const int id = free_list_.front();
  Block& block = blocks_[std::size_t(id)];
  if (block.hashed) {  // evict its cached contents: a later hit must not read what is written
    auto& cache = block.sliding ? sliding_cached_ : cached_;
    auto it = cache.find(block.hash);
    if (it != cache.end() && it->second == id) cache.erase(it);
    block.hashed = false;
    block.tokens.clear();
  }
  reference(id);
  return id;
}

void KvBlockPool::allocate(Sequence& seq, int num_new_tokens) {
  assert(seq.block_table.empty() && seq.window_block_table.empty());
  const PrefixHit hit = match_prefix(seq);
  for (int id : hit.full) {
    reference(id);
    seq.block_table.push_back(id);
    seq.block_hashes.push_back(blocks_[std::size_t(id)].hash);
  }
  for (int id : hit.sliding) {
    if (id != kFreedBlock) reference(id);
    seq.window_block_table.push_back(id);
  }
  const int cached_tokens = hit.tokens(block_size_);
  seq.num_computed_tokens = cached_tokens;
  seq.num_cached_prompt_tokens = cached_tokens;
  if (prefix_caching_) {
    stats_.queried_tokens += std::uint64_t(seq.num_tokens());
    stats_.hit_tokens += std::uint64_t(cached_tokens);
  }
  grow_tables(seq, blocks_for_tokens(cached_tokens + num_new_tokens));
}

bool KvBlockPool::can_append(const Sequence& seq, int num_new_tokens) const {
  const int total = blocks_for_tokens(seq.num_computed_tokens + num_new_tokens);
  int needed = total - int(seq.block_table.size());
  if (sliding_window_ > 0)
    needed += total - int(seq.window_block_table.size()) -
              window_blocks_to_free(seq, seq.num_computed_tokens);
  return needed <= num_free_blocks();
}

void KvBlockPool::append_slots(Sequence& seq, int num_new_tokens) {
  grow_tables(seq, blocks_for_tokens(seq.num_computed_tokens + num_new_tokens));
}

void KvBlockPool::register_block(int id, std::uint64_t h, const int* block_tokens, bool sliding) {
  Block& block = blocks_[std::size_t(id)];
  auto& cache = sliding ? sliding_cached_ : cached_;
  // If another block already holds this prefix, keep that one as the cached copy.
  if (!block.hashed && cache.emplace(h, id).second) {
    block.hashed = true;
    block.sliding = sliding;
    block.hash = h;
    block.tokens.assign(block_tokens, block_tokens + block_size_);
  }
}

void KvBlockPool::commit_computed(Sequence& seq) {
  if (!prefix_caching_) return;
  const int full_blocks = seq.num_computed_tokens / block_size_;
  for (int i = int(seq.block_hashes.size()); i < full_blocks; ++i) {
    const std::uint64_t parent = i == 0 ? kRootHash : seq.block_hashes[std::size_t(i - 1)];
    const int* block_tokens = seq.tokens.data() + std::ptrdiff_t(i) * block_size_;
    const std::uint64_t h = chain_hash(parent, block_tokens, block_size_);
    seq.block_hashes.push_back(h);
    register_block(seq.block_table[std::size_t(i)], h, block_tokens, false);
    // A sliding block that already left the window (kFreedBlock) is not there to cache.
    if (i < int(seq.window_block_table.size()) &&
        seq.window_block_table[std::size_t(i)] != kFreedBlock)
      register_block(seq.window_block_table[std::size_t(i)], h, block_tokens, true);
  }
}

void KvBlockPool::release(int block_id) {
  Block& block = blocks_[std::size_t(block_id)];
  if (--block.ref_count > 0) return;
  // Blocks worth keeping (cached prefixes) go to the back, the rest are reused first.
  block.free_pos = block.hashed ? free_list_.insert(free_list_.end(), block_id)
                                : free_list_.insert(free_list_.begin(), block_id);
  block.in_free_list = true;
}

void KvBlockPool::release_unused_blocks(Sequence& seq) {
  const std::size_t keep = std::size_t(blocks_for_tokens(seq.num_tokens()));
  while (seq.block_table.size() > keep) {
    release(seq.block_table.back());
    seq.block_table.pop_back();
  }
  while (seq.window_block_table.size() > keep) {
    if (seq.window_block_table.back() != kFreedBlock) release(seq.window_block_table.back());
    seq.window_block_table.pop_back();
  }
}

void KvBlockPool::free(Sequence& seq) {
  for (auto it = seq.window_block_table.rbegin(); it != seq.window_block_table.rend(); ++it)
    if (*it != kFreedBlock) release(*it);
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) release(*it);
  seq.block_table.clear();
  seq.window_block_table.clear();
  seq.block_hashes.clear();
  seq.num_computed_tokens = 0;
}

}  // namespace nibble::runtime

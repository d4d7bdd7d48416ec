#pragma once
// Owns the paged KV cache's blocks: who holds which block, which blocks are free, and the
// prefix cache. Prefix caching: a full block of computed tokens is keyed by a hash chained
// over every token before it, so two sequences share a block only if their whole prefix up to
// that block is equal (tokens are compared too, so a hash collision cannot share wrong KV).
// Freed blocks keep their contents and key and are reused least-recently-freed first.
// Check, then act: callers ask can_allocate/can_append before allocate/append_slots, so a step
// never half-applies.
//
// Sliding-window models (sliding_window > 0, ModelRunner::kv_sliding_window): every block holds
// one group's layers, the full-attention group's (Sequence::block_table) or the sliding group's
// (Sequence::window_block_table). Both tables cover the same positions, but the sliding table
// keeps only the blocks a step's rows can still see: a row at position p reads keys from
// p - window + 1, so before a step starting at position s every sliding block wholly before
// s - window + 1 goes back to the pool and its entry becomes kFreedBlock.
//
// Prefix caching with a window (as vLLM's hybrid cache coordinator does it): each group caches
// its own full blocks under the same chained hash, the sliding group's while they are still
// held or freed but not yet taken again. A hit of n blocks (P = n * block_size tokens) is usable
// only if the full group has all n blocks and the sliding group has those a step starting at P
// reads, blocks first_window_block(P) .. n - 1; the blocks before them stay kFreedBlock. The hit
// taken is the longest n for which both hold, so a sliding block that went back to the pool and
// was taken by another sequence (its cache entry dropped then) is never read as this prefix.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "engine/runtime/sequence.h"

namespace nibble::runtime {

struct PrefixCacheStats {
  std::uint64_t queried_tokens = 0;  // prompt tokens looked up at admission
  std::uint64_t hit_tokens = 0;      // of those, found in the cache
};

// A sliding table's entry for a block that left the window (never read by a backend).
constexpr int kFreedBlock = -1;

// Blocks one sequence of num_tokens holds at most, over both groups: its full-attention blocks
// and, with a window, the sliding blocks a step of up to max_chunk tokens can see (the window
// before the step's first row, the chunk, and one block straddling the window's start).
int kv_blocks_per_sequence(int num_tokens, int block_size, int sliding_window, int max_chunk);

// What a KV cache of num_blocks blocks of block_bytes holds: tokens of context per GiB when it
// is filled with sequences of max_model_len tokens (each kv_blocks_per_sequence blocks), and how
// many such sequences fit at once. A window shrinks a block to one group's layers and bounds
// the sliding group's blocks, so a long sequence costs about its full-attention layers' bytes.
struct KvCapacity {
  double tokens_per_gib = 0;
  int max_full_length_sequences = 0;
};
KvCapacity kv_capacity(std::size_t block_bytes, int block_size, int sliding_window, int num_blocks,
                       int max_model_len, int max_chunk);

class KvBlockPool {
 public:
  // sliding_window: 0 for one group of blocks (every layer keeps every position); > 0 for a
  // second, sliding group that frees blocks leaving the window. Throws std::invalid_argument for
  // a negative window.
  KvBlockPool(int num_blocks, int block_size, bool enable_prefix_caching, int sliding_window = 0);

  int block_size() const { return block_size_; }
  int num_blocks() const { return int(blocks_.size()); }
  int num_free_blocks() const { return int(free_list_.size()); }
  // Fraction of blocks referenced by some sequence, in either group (cached-but-free blocks count
  // as free): held blocks over the pool, divided once so that it is exactly that ratio.
  double usage() const { return double(num_blocks() - num_free_blocks()) / double(num_blocks()); }
  const PrefixCacheStats& prefix_stats() const { return stats_; }
  int blocks_for_tokens(int num_tokens) const {
    return (num_tokens + block_size_ - 1) / block_size_;
  }
  int sliding_window() const { return sliding_window_; }
  // The sliding table's first block a step starting at position `start` reads.
  int first_window_block(int start) const {
    return sliding_window_ > 0 ? std::max(0, start - sliding_window_ + 1) / block_size_ : 0;
  }
  // Blocks the sequence holds in both groups (its sliding table's freed entries excluded).
  int num_held_blocks(const Sequence& seq) const;
  // Longest sequence (prompt and output) the pool can ever hold, with steps of up to max_chunk.
  int max_tokens_per_sequence(int max_chunk) const;

  // Admission of a sequence with no blocks: reuse its cached prefix (leaving at least one
  // token to compute, whose logits are needed; with a window, only as far as the sliding group
  // still has the window before it) and allocate blocks for num_new_tokens more.
  // cached_prefix_tokens: the prefix tokens allocate would take from the cache.
  int cached_prefix_tokens(const Sequence& seq) const;
  bool can_allocate(const Sequence& seq, int num_new_tokens) const;
  void allocate(Sequence& seq, int num_new_tokens);

  // Growth of a sequence that holds blocks: room for num_new_tokens beyond its computed ones.
  bool can_append(const Sequence& seq, int num_new_tokens) const;
  void append_slots(Sequence& seq, int num_new_tokens);

  // After a step: register every newly full block of computed tokens with the prefix cache.
  void commit_computed(Sequence& seq);

  // Speculative decoding: releases the blocks past the ones holding the sequence's tokens (they
  // held only rejected drafts' slots), in both groups. They were never hashed, so they are reused
  // first.
  void release_unused_blocks(Sequence& seq);

  // Releases the sequence's blocks (tail first, so shared prefixes stay cached longest) and
  // clears its block tables.
  void free(Sequence& seq);

 private:
  struct Block {
    int ref_count = 0;
    bool hashed = false;
    bool sliding = false;  // while hashed: cached in sliding_cached_, else in cached_
    std::uint64_t hash = 0;
    std::vector<int> tokens;  // the block's tokens, kept to verify a hash match
    std::list<int>::iterator free_pos;
    bool in_free_list = false;
  };

  // A usable prefix hit: the full group's blocks 0 .. n - 1 and, with a window, the sliding
  // group's blocks for the same positions (kFreedBlock before first_window_block(n * size)).
  struct PrefixHit {
    std::vector<int> full;
    std::vector<int> sliding;  // empty without a window
    int tokens(int block_size) const { return int(full.size()) * block_size; }
  };
  // The longest usable hit of seq's leading blocks, leaving its last token to compute.
  PrefixHit match_prefix(const Sequence& seq) const;
  // The block cached under hash h in one group whose tokens are block_tokens, or -1.
  int cached_block(const std::unordered_map<std::uint64_t, int>& cache, std::uint64_t h,
                   const int* block_tokens) const;
  // Registers block `id` of one group under hash h unless it or another block holds it already.
  void register_block(int id, std::uint64_t h, const int* block_tokens, bool sliding);
  int take_free_block();
  void reference(int block_id);
  void release(int block_id);  // drops one reference; the last one frees the block
  static std::uint64_t chain_hash(std::uint64_t parent, const int* tokens, int count);
  // Sliding blocks of seq that a step starting at position `start` no longer reads and that go
  // back to the pool when it lets them go (no other sequence holds them).
  int window_blocks_to_free(const Sequence& seq, int start) const;
  // Returns those blocks to the pool, then grows both tables to `total` blocks.
  void grow_tables(Sequence& seq, int total);

  int block_size_;
  bool prefix_caching_;
  int sliding_window_;
  std::vector<Block> blocks_;
  std::list<int> free_list_;                               // front: evicted first
  std::unordered_map<std::uint64_t, int> cached_;          // chained hash -> full-group block
  std::unordered_map<std::uint64_t, int> sliding_cached_;  // chained hash -> sliding block
  PrefixCacheStats stats_;
};

}  // namespace nibble::runtime

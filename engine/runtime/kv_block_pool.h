#pragma once
// Owns the paged KV cache's blocks: who holds which block, which blocks are free, and the
// prefix cache. Prefix caching: a full block of computed tokens is keyed by a hash chained
// over every token before it, so two sequences share a block only if their whole prefix up to
// that block is equal (tokens are compared too, so a hash collision cannot share wrong KV).
// Freed blocks keep their contents and key and are reused least-recently-freed first.
// Check, then act: callers ask can_allocate/can_append before allocate/append_slots, so a step
// never half-applies.
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

class KvBlockPool {
 public:
  KvBlockPool(int num_blocks, int block_size, bool enable_prefix_caching);

  int block_size() const { return block_size_; }
  int num_blocks() const { return int(blocks_.size()); }
  int num_free_blocks() const { return int(free_list_.size()); }
  // Fraction of blocks referenced by some sequence (cached-but-free blocks count as free).
  double usage() const { return 1.0 - double(num_free_blocks()) / double(num_blocks()); }
  const PrefixCacheStats& prefix_stats() const { return stats_; }
  int blocks_for_tokens(int num_tokens) const {
    return (num_tokens + block_size_ - 1) / block_size_;
  }

  // Admission of a sequence with no blocks: reuse its cached prefix (leaving at least one
  // token to compute, whose logits are needed) and allocate blocks for num_new_tokens more.
  // Returns the number of prefix tokens found in the cache, or -1 if there are not enough
  // free blocks (nothing changes then).
  int cached_prefix_tokens(const Sequence& seq) const;
  bool can_allocate(const Sequence& seq, int num_new_tokens) const;
  void allocate(Sequence& seq, int num_new_tokens);

  // Growth of a sequence that holds blocks: room for num_new_tokens beyond its computed ones.
  bool can_append(const Sequence& seq, int num_new_tokens) const;
  void append_slots(Sequence& seq, int num_new_tokens);

  // After a step: register every newly full block of computed tokens with the prefix cache.
  void commit_computed(Sequence& seq);

  // Speculative decoding: releases the blocks past the ones holding the sequence's tokens (they
  // held only rejected drafts' slots). They were never hashed, so they are reused first.
  void release_unused_blocks(Sequence& seq);

  // Releases the sequence's blocks (tail first, so shared prefixes stay cached longest) and
  // clears its block table.
  void free(Sequence& seq);

 private:
  struct Block {
    int ref_count = 0;
    bool hashed = false;
    std::uint64_t hash = 0;
    std::vector<int> tokens;  // the block's tokens, kept to verify a hash match
    std::list<int>::iterator free_pos;
    bool in_free_list = false;
  };

  // Leading blocks of seq that the cache holds, by chained hash, up to max_blocks.
  std::vector<int> match_prefix(const Sequence& seq, int max_blocks) const;
  int take_free_block();
  void reference(int block_id);
  void release(int block_id);  // drops one reference; the last one frees the block
  static std::uint64_t chain_hash(std::uint64_t parent, const int* tokens, int count);

  int block_size_;
  bool prefix_caching_;
  std::vector<Block> blocks_;
  std::list<int> free_list_;                       // front: evicted first
  std::unordered_map<std::uint64_t, int> cached_;  // chained hash -> block id
  PrefixCacheStats stats_;
};

}  // namespace nibble::runtime

#pragma once
// Exact verification of a draft against the target model. The target's token at each draft
// position is drawn by the sequence's own sampler from the logits of that position (penalties,
// masks, temperature, top-k/p, min-p: the same code and random stream as without
// speculation). Drafts are accepted while they equal the target's token; the first token that
// differs, or the token after the last draft (the bonus), ends the step.
//
// Greedy requests: the target's token is the argmax, so this is "the longest prefix that matches
// the argmax, plus one": exactly the tokens of non-speculative decoding.
// Sampled requests: for a drafter that proposes one token with certainty (q one-hot: ngram and
// the reference drafters), this is rejection sampling. The draft d is accepted with probability
// P(x = d) = p(d) = min(1, p(d) / q(d)); a rejected x is distributed as p restricted to x != d,
// renormalized, which is the normalized residual max(0, p - q). The output distribution is the
// target's, and a seeded request even gives the very tokens it gives without speculation, since
// each emitted token uses the random draw it would have used. Drafters with a draft distribution
// q (EAGLE, MTP) will need the general min(1, p/q) test.
#include <functional>
#include <span>

namespace nibble::spec {

// target_token(j) draws the target's token at draft position j (0..drafts.size()), given that
// drafts [0, j) were accepted; it is called for j = 0, 1, ... in order and stops after the first
// mismatch. Returns how many drafts were accepted: the step emits target_token(0..accepted).
int accept_drafts(std::span<const int> drafts, const std::function<int(int)>& target_token);

}  // namespace nibble::spec

#include "kernels/attention/decode_attention_ref.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "kernels/attention/decode_attention_plan.h"

namespace nibble::kernels {
namespace {

// A partial softmax: running maximum m (exp2 units), sum l, unnormalised output o.
struct Partial {
  double m = -INFINITY, l = 0;
  std::vector<double> o;
};

void merge_into(Partial& into, const Partial& from) {
  const double m = std::max(into.m, from.m);
  if (m == -INFINITY) return;
  const double a = into.m == -INFINITY ? 0.0 : std::exp2(into.m - m);
  const double b = from.m == -INFINITY ? 0.0 : std::exp2(from.m - m);
  into.l = into.l * a + from.l * b;
  for (std::size_t d = 0; d < into.o.size(); ++d) into.o[d] = into.o[d] * a + from.o[d] * b;
  into.m = m;
}

}  // namespace

std::vector<double> decode_attention_model(std::span<const float> q, std::span<const float> k,
                                           std::span<const float> v, const RefAttentionShape& s,
                                           std::span<const RefSequence> sequences, double scale,
                                           int splits, const RefAttentionFeatures& features) {
  const int Hq = s.q_heads, Hkv = s.kv_heads, D = s.head_dim, bs = s.block_size;
  if (Hkv <= 0 || Hq % Hkv != 0 || D <= 0 || bs <= 0 || k.size() != v.size() || splits < 1 ||
      decode_plan::pow2_at_most(splits) != splits)
    throw std::invalid_argument("decode_attention_model: bad shape or split count");
  if (q.size() != sequences.size() * std::size_t(Hq * D))
    throw std::invalid_argument("decode_attention_model: q must hold one row per sequence");
  if ((!features.sinks.empty() && features.sinks.size() != std::size_t(Hq)) || features.window < 0)
    throw std::invalid_argument("decode_attention_model: bad sinks or window");
  const std::size_t cache_rows = k.size() / std::size_t(Hkv * D);
  const int chunk = decode_plan::chunk_keys(D), cluster = decode_plan::cluster_size(splits);
  const double to_exp2 = scale / std::log(2.0);
  std::vector<double> out(q.size());
  for (std::size_t row = 0; row < sequences.size(); ++row) {
    const RefSequence& seq = sequences[row];
    if (seq.count != 1) throw std::invalid_argument("decode_attention_model: decodes only");
    // The window's keys [first, first + keys), split as a context of `keys` keys would be.
    const int first = decode_plan::first_key(seq.start, features.window);
    const int keys = seq.start + 1 - first;
    auto slot = [&](int key) {
      const std::size_t block = std::size_t(key / bs);
      if (block >= seq.table.size())
        throw std::invalid_argument("decode_attention_model: block table too short");
      const std::size_t at =
          std::size_t(seq.table[block]) * std::size_t(bs) + std::size_t(key % bs);
      if (at >= cache_rows)
        throw std::invalid_argument("decode_attention_model: block id past the cache");
      return at;
    };
    for (int h = 0; h < Hq; ++h) {
      const int kvh = h / (Hq / Hkv);
      const float* qr = q.data() + (row * std::size_t(Hq) + std::size_t(h)) * std::size_t(D);
      std::vector<Partial> clusters(std::size_t(decode_plan::partials(splits)));
      for (Partial& p : clusters) p.o.assign(std::size_t(D), 0.0);
      for (int split = 0; split < splits; ++split) {
        const decode_plan::KeyRange range =
            decode_plan::offset(decode_plan::split_keys(keys, split, splits, chunk), first);
        Partial block;
        block.o.assign(std::size_t(D), 0.0);
        for (int w = 0; w < decode_plan::kWarps; ++w) {
          Partial warp;
          warp.o.assign(std::size_t(D), 0.0);
          for (int c0 = range.begin + w * chunk; c0 < range.end; c0 += decode_plan::kWarps * chunk)
            for (int k0 = c0; k0 < std::min(c0 + chunk, range.end); k0 += decode_plan::kStepKeys) {
              // One mma step: its scores, then the online update.
              const int k1 = std::min(k0 + decode_plan::kStepKeys, range.end);
              std::vector<double> score;
              double mx = -INFINITY;
              for (int key = k0; key < k1; ++key) {
                const float* kr =
                    k.data() + (slot(key) * std::size_t(Hkv) + std::size_t(kvh)) * std::size_t(D);
                double dot = 0;
                for (int d = 0; d < D; ++d) dot += double(qr[d]) * kr[d];
                score.push_back(dot * to_exp2);
                mx = std::max(mx, score.back());
              }
              const double m = std::max(warp.m, mx);
              const double alpha = warp.m == -INFINITY ? 0.0 : std::exp2(warp.m - m);
              warp.l *= alpha;
              for (double& o : warp.o) o *= alpha;
              for (int key = k0; key < k1; ++key) {
                const double p = std::exp2(score[std::size_t(key - k0)] - m);
                const float* vr =
                    v.data() + (slot(key) * std::size_t(Hkv) + std::size_t(kvh)) * std::size_t(D);
                warp.l += p;
                for (int d = 0; d < D; ++d) warp.o[std::size_t(d)] += p * vr[d];
              }
              warp.m = m;
            }
          merge_into(block, warp);
        }
        merge_into(clusters[std::size_t(split / cluster)], block);
      }
      // The merge kernel's step works in natural units: the same weights.
      Partial all;
      all.o.assign(std::size_t(D), 0.0);
      for (const Partial& p : clusters) merge_into(all, p);
      if (!features.sinks.empty()) {  // one more logit, no value: sum 1 at its own max
        Partial sink;
        sink.m = double(features.sinks[std::size_t(h)]) / std::log(2.0);
        sink.l = 1;
        sink.o.assign(std::size_t(D), 0.0);
        merge_into(all, sink);
      }
      for (int d = 0; d < D; ++d)
        out[(row * std::size_t(Hq) + std::size_t(h)) * std::size_t(D) + std::size_t(d)] =
            all.o[std::size_t(d)] / all.l;
    }
  }
  return out;
}

}  // namespace nibble::kernels

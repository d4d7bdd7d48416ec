#include "kernels/attention/attention_ref.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>

namespace nibble::kernels {

std::vector<double> paged_attention_ref(std::span<const float> q, std::span<const float> k,
                                        std::span<const float> v, const RefAttentionShape& s,
                                        std::span<const RefSequence> sequences, double scale,
                                        const RefAttentionFeatures& features) {
  const int Hq = s.q_heads, Hkv = s.kv_heads, D = s.head_dim, bs = s.block_size;
  if (Hkv <= 0 || Hq % Hkv != 0 || D <= 0 || bs <= 0 || k.size() != v.size())
    throw std::invalid_argument("paged_attention_ref: bad shape");
  if (!features.sinks.empty() && features.sinks.size() != std::size_t(Hq))
    throw std::invalid_argument("paged_attention_ref: sinks must hold one logit per query head");
  if (features.window < 0) throw std::invalid_argument("paged_attention_ref: negative window");
  const std::size_t cache_rows = k.size() / std::size_t(Hkv * D);
  std::vector<double> out(q.size());
  std::vector<double> score;
  std::vector<double> acc(static_cast<std::size_t>(D));
  std::int64_t row = 0;
  for (const RefSequence& seq : sequences)
    for (int i = 0; i < seq.count; ++i, ++row) {
      if (std::size_t((row + 1) * Hq * D) > q.size())
        throw std::invalid_argument("paged_attention_ref: q holds fewer rows than the sequences");
      const int pos = seq.start + i;
      const int first = features.window > 0 ? std::max(0, pos - features.window + 1) : 0;
      std::vector<std::int64_t> slots(std::size_t(pos + 1));
      for (int p = first; p <= pos; ++p) {
        const std::size_t block = std::size_t(p / bs);
        if (block >= seq.table.size())
          throw std::invalid_argument("paged_attention_ref: block table too short");
        slots[std::size_t(p)] = std::int64_t(seq.table[block]) * bs + p % bs;
        if (std::size_t(slots[std::size_t(p)]) >= cache_rows)
          throw std::invalid_argument("paged_attention_ref: block id past the cache");
      }
      for (int h = 0; h < Hq; ++h) {
        const int kvh = h / (Hq / Hkv);
        const float* qr = q.data() + (row * Hq + h) * D;
        score.assign(std::size_t(pos + 1), 0.0);
        // The sink is one more logit of the softmax, with no value row.
        const double sink = features.sinks.empty() ? -INFINITY : double(features.sinks[h]);
        double mx = sink;
        for (int p = first; p <= pos; ++p) {
          const float* kr = k.data() + (slots[std::size_t(p)] * Hkv + kvh) * D;
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += double(qr[d]) * kr[d];
          score[std::size_t(p)] = dot * scale;
          mx = std::max(mx, score[std::size_t(p)]);
        }
        double sum = std::exp(sink - mx);
        for (int p = first; p <= pos; ++p)
          sum += (score[std::size_t(p)] = std::exp(score[std::size_t(p)] - mx));
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int p = first; p <= pos; ++p) {
          const float* vr = v.data() + (slots[std::size_t(p)] * Hkv + kvh) * D;
          const double w = score[std::size_t(p)] / sum;
          for (int d = 0; d < D; ++d) acc[std::size_t(d)] += w * vr[d];
        }
        std::copy(acc.begin(), acc.end(), out.begin() + (row * Hq + h) * D);
      }
    }
  return out;
}

}  // namespace nibble::kernels

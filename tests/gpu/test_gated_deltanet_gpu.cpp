// The device Gated DeltaNet token mixing (kernels/linear_attention/gated_deltanet.h, and the
// chunked form with its dispatcher, gated_deltanet_chunked.h) against the CPU reference
// (gated_deltanet_ref.h) on fresh random inputs (the seed is printed; NIBBLE_TEST_SEED reruns it):
// head shapes from tiny to Qwen3-Next-80B's (16 key heads, 32 value heads, 128 x 128), 1 to 8 rows
// in shuffled slots of a larger pool from random starting states, a prefill step of chunks of 1 to
// 257 tokens then five decode steps, conv kernels 4 and 2. Outputs (BF16, poisoned first) within
// relative L2 1e-2 (METHOD.md's BF16 bound) of the reference (its chunked form for the prefill),
// recurrent states within 1e-4 after the six steps (1e-2 where the chunked form ran), conv windows
// bitwise, slots no row uses untouched; a step replayed from a CUDA graph gives the bits of one
// eager launch; a prompt split into launches gives the bits of one (recurrent), or both stay
// within 1e-2 of the reference (chunked); verify rows' snapshots (check_snapshots) against the
// reference's state after each token. Exits 77 (ctest: skipped) without a GPU. `--bench`
// times Qwen3-Next-80B's layers (gated_deltanet_bench.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/linear_attention/gated_deltanet.h"
#include "kernels/linear_attention/gated_deltanet_chunked.h"
#include "kernels/linear_attention/gated_deltanet_ref.h"
#include "kernels/nvfp4/bf16.h"
#include "tests/gpu/bf16_checks.h"
#include "tests/gpu/gated_deltanet_bench.h"
#include "tests/gpu/gpu_check_support.h"

namespace nibble {
namespace {

using gpu_test::random_bf16;

using kernels::GatedDeltaNetShape;
using nvfp4::bf16_to_float;
using nvfp4::float_to_bf16;

template <typename T>
using Device = gpu_test::DeviceArray<T>;

double relative_l2(const std::vector<float>& want, const std::vector<float>& got) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = double(want[i]) - got[i];
    diff += std::isfinite(d) ? d * d : 1e300;
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

// BF16 values from N(0, sigma), and their floats (what the reference computes with).
std::vector<float> floats(const std::vector<std::uint16_t>& v) {
  std::vector<float> f(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) f[i] = bf16_to_float(v[i]);
  return f;
}

struct Case {
  const char* name;
  int k_heads, v_heads, k_dim, v_dim, conv_kernel, rows;
  int min_chunked = INT_MAX;  // rows this long take the chunked form (INT_MAX: none)
};

// The step's rows in shuffled slots: their token counts, packed in row order.
std::vector<kernels::GatedDeltaNetRow> pack_rows(const std::vector<std::int32_t>& slot,
                                                 const std::vector<int>& counts) {
  std::vector<kernels::GatedDeltaNetRow> rows;
  std::int32_t first = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    rows.push_back({slot[r], first, counts[r]});
    first += counts[r];
  }
  return rows;
}

struct Pool {
  std::vector<float> conv, state;
};

// One step on the device: the rows' tokens through gated_deltanet_mix (eager, or captured in a
// graph and replayed), the pool as left and the outputs.
struct Launch {
  const GatedDeltaNetShape& shape;
  const kernels::GatedDeltaNetDeviceParams& params;
  // INT_MAX: gated_deltanet_mix (the recurrent form); else gated_deltanet_mix_step with rows of
  // at least this many tokens through the chunked form.
  int min_chunked = INT_MAX;
  std::vector<std::uint16_t> run(const std::vector<kernels::GatedDeltaNetRow>& rows,
                                 const std::vector<std::uint16_t>& qkvz,
                                 const std::vector<std::uint16_t>& ba, Pool& pool, bool graph) {
    const std::size_t tokens = qkvz.size() / std::size_t(shape.qkvz_width());
    Device<kernels::GatedDeltaNetRow> d_rows(rows.size());
    Device<std::uint16_t> d_qkvz(qkvz.size()), d_ba(ba.size()),
        d_out(tokens * std::size_t(shape.value_dim()));
    Device<float> d_conv(pool.conv.size()), d_state(pool.state.size());
    d_rows.upload(rows);
    d_qkvz.upload(qkvz);
    d_ba.upload(ba);
    d_conv.upload(pool.conv);
    d_state.upload(pool.state);
    NIBBLE_CUDA_CHECK(cudaMemset(d_out.ptr, 0xFF, d_out.n * sizeof(std::uint16_t)));  // NaNs
    cudaStream_t stream;
    NIBBLE_CUDA_CHECK(cudaStreamCreate(&stream));
    const std::size_t work_bytes =
        kernels::gated_deltanet_chunked_workspace_bytes(shape, std::int64_t(tokens));
    Device<std::uint8_t> d_work(work_bytes);
    NIBBLE_CUDA_CHECK(cudaMemset(d_work.ptr, 0xFF, d_work.n));  // nothing may read it unwritten
    int longest = 0;
    for (const auto& row : rows) longest = std::max(longest, int(row.count));
    auto launch = [&] {
      if (min_chunked == INT_MAX) {
        NIBBLE_CUDA_CHECK(
            kernels::gated_deltanet_mix(shape, d_rows.ptr, int(rows.size()), d_qkvz.ptr, d_ba.ptr,
                                        params, {d_conv.ptr, d_state.ptr}, d_out.ptr, stream));
        return;
      }
      const kernels::GatedDeltaNetStepRows step{d_rows.ptr, int(rows.size()), std::int64_t(tokens),
                                                longest};
      NIBBLE_CUDA_CHECK(kernels::gated_deltanet_mix_step(
          shape, step, d_qkvz.ptr, d_ba.ptr, params, {d_conv.ptr, d_state.ptr},
          {d_work.ptr, work_bytes}, d_out.ptr, stream, min_chunked));
    };
    if (graph) {
      cudaGraph_t g;
      cudaGraphExec_t exec;
      NIBBLE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      launch();
      NIBBLE_CUDA_CHECK(cudaStreamEndCapture(stream, &g));
      NIBBLE_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
      NIBBLE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      NIBBLE_CUDA_CHECK(cudaStreamSynchronize(stream));
      NIBBLE_CUDA_CHECK(cudaGraphExecDestroy(exec));
      NIBBLE_CUDA_CHECK(cudaGraphDestroy(g));
    } else {
      launch();
      NIBBLE_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    NIBBLE_CUDA_CHECK(cudaStreamDestroy(stream));
    pool.conv = d_conv.download();
    pool.state = d_state.download();
    return d_out.download();
  }
};

// A layer's parameters drawn at random: conv weights (BF16), A_log, dt_bias, the norm's weight.
struct LayerParams {
  std::vector<std::uint16_t> conv_w;
  std::vector<float> A_log, dt_bias, norm_w;
};
LayerParams random_layer_params(std::mt19937_64& rng, const Case& c,
                                const GatedDeltaNetShape& shape) {
  LayerParams p;
  p.conv_w = random_bf16(rng, std::size_t(shape.conv_dim() * c.conv_kernel), 0.5f);
  std::uniform_real_distribution<float> uniform(0.01f, 16.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  p.A_log.resize(std::size_t(c.v_heads));
  p.dt_bias.resize(p.A_log.size());
  p.norm_w.resize(std::size_t(c.v_dim));
  for (auto& x : p.A_log) x = std::log(uniform(rng));
  for (auto& x : p.dt_bias) x = 1.0f + 0.1f * normal(rng);
  for (auto& x : p.norm_w) x = 1.0f + 0.1f * normal(rng);
  return p;
}

// Six steps: a prefill of mixed chunk lengths (1 to 130 tokens; 1 to 257 where rows of
// c.min_chunked tokens take the chunked form), then five decode steps (one step also replayed from
// a graph: the last, or the prefill where the chunked form runs), against the reference row by row
// (the prefill through its chunked form, decode through the recurrent one); then a prompt split
// into launches against one.
void check_case(gpu_test::Results& results, std::mt19937_64& rng, const Case& c) {
  GatedDeltaNetShape shape;
  shape.heads = {c.k_heads, c.v_heads, c.k_dim, c.v_dim};
  shape.conv_kernel = c.conv_kernel;
  const int nrows = c.rows, slots = nrows + 3, steps = 6;
  const auto conv_floats = std::size_t(shape.conv_state_floats());
  const auto state_floats = std::size_t(shape.heads.state_floats());
  const LayerParams layer = random_layer_params(rng, c, shape);
  const auto& conv_w = layer.conv_w;
  const auto &A_log = layer.A_log, &dt_bias = layer.dt_bias, &norm_w = layer.norm_w;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Random states everywhere (as after earlier chunks); row r in slot slot[r].
  Pool pool{std::vector<float>(conv_floats * std::size_t(slots)),
            std::vector<float>(state_floats * std::size_t(slots))};
  for (auto& x : pool.conv) x = bf16_to_float(float_to_bf16(normal(rng)));
  for (auto& x : pool.state) x = 0.1f * normal(rng);
  const Pool start = pool;
  std::vector<std::int32_t> slot(static_cast<std::size_t>(slots));
  std::iota(slot.begin(), slot.end(), 0);
  std::shuffle(slot.begin(), slot.end(), rng);
  slot.resize(std::size_t(nrows));

  Device<std::uint16_t> d_conv_w(conv_w.size());
  Device<float> d_A(A_log.size()), d_dt(dt_bias.size()), d_norm(norm_w.size());
  d_conv_w.upload(conv_w);
  d_A.upload(A_log);
  d_dt.upload(dt_bias);
  d_norm.upload(norm_w);
  const kernels::GatedDeltaNetDeviceParams params{d_conv_w.ptr, d_A.ptr, d_dt.ptr, d_norm.ptr,
                                                  1e-6f};
  Launch device{shape, params, c.min_chunked};
  const bool chunked = c.min_chunked != INT_MAX;
  const std::vector<float> conv_wf = floats(conv_w);
  const kernels::GatedDeltaNetParams ref_params{conv_wf, A_log, dt_bias, norm_w, 1e-6f};
  Pool ref = pool;

  double worst_out = 0.0;
  bool graph_same = true;
  // The chunked cases' prompts end inside a chunk, on a boundary, and short of one.
  const int prefill_counts[] = {1, 17, 130, 64, 5, 33, 2, 70};
  const int chunked_counts[] = {130, 1, 200, 64, 5, 63, 257, 70};
  for (int step = 0; step < steps; ++step) {
    std::vector<int> counts;
    for (int r = 0; r < nrows; ++r)
      counts.push_back(step > 0 ? 1 : chunked ? chunked_counts[r % 8] : prefill_counts[r % 8]);
    const auto rows = pack_rows(slot, counts);
    const int tokens = rows.back().first + rows.back().count;
    const auto qkvz = random_bf16(rng, std::size_t(tokens * shape.qkvz_width()), 1.0f);
    const auto ba = random_bf16(rng, std::size_t(tokens * shape.ba_width()), 2.0f);
    // The chunked form's launches are captured too (the prefill step), as a decode step is.
    const bool graph_step = step == (chunked ? 0 : steps - 1);
    Pool before = pool;
    const std::vector<float> got = floats(device.run(rows, qkvz, ba, pool, false));
    if (graph_step) {
      const std::vector<std::uint16_t> replay = device.run(rows, qkvz, ba, before, true);
      graph_same = floats(replay) == got && before.conv == pool.conv && before.state == pool.state;
    }
    std::vector<float> want(got.size());
    const auto qkvzf = floats(qkvz), baf = floats(ba);
    for (const auto& row : rows) {
      const auto s = std::size_t(row.slot), f = std::size_t(row.first), n = std::size_t(row.count);
      kernels::gated_deltanet_mix_ref(
          shape, row.count,
          {qkvzf.data() + f * std::size_t(shape.qkvz_width()), n * std::size_t(shape.qkvz_width())},
          {baf.data() + f * std::size_t(shape.ba_width()), n * std::size_t(shape.ba_width())},
          ref_params, {ref.conv.data() + s * conv_floats, conv_floats},
          {ref.state.data() + s * state_floats, state_floats},
          {want.data() + f * std::size_t(shape.value_dim()), n * std::size_t(shape.value_dim())},
          step == 0);
    }
    worst_out = std::max(worst_out, relative_l2(want, got));
  }
  const double state_err = relative_l2(ref.state, pool.state);
  const bool conv_same = pool.conv == ref.conv;  // the window holds inputs: exact
  bool untouched = true;                         // slots no row used: as they started
  for (int s = 0; s < slots; ++s) {
    if (std::find(slot.begin(), slot.end(), s) != slot.end()) continue;
    for (std::size_t i = 0; i < state_floats; ++i)
      untouched &= pool.state[std::size_t(s) * state_floats + i] ==
                   start.state[std::size_t(s) * state_floats + i];
  }
  // A prompt in one chunk, and split in launches: recurrent, 70 tokens as 23 + 47, the same bits;
  // chunked, 300 tokens as 100 + 137 + 63 (the last one recurrent), both within the bounds of the
  // reference's (its recurrent form over the 300 tokens).
  const std::vector<std::int32_t> one_slot{slot[0]};
  const std::vector<int> parts =
      chunked ? std::vector<int>{100, 137, 63} : std::vector<int>{23, 47};
  const int prompt = std::accumulate(parts.begin(), parts.end(), 0);
  const auto qkvz = random_bf16(rng, std::size_t(prompt * shape.qkvz_width()), 1.0f);
  const auto ba = random_bf16(rng, std::size_t(prompt * shape.ba_width()), 2.0f);
  Pool whole = start, split = start, prompt_ref = start;
  const auto whole_out = device.run(pack_rows(one_slot, {prompt}), qkvz, ba, whole, false);
  auto part = [&](const std::vector<std::uint16_t>& v, std::size_t width, int from, int count) {
    return std::vector<std::uint16_t>(
        v.begin() + std::ptrdiff_t(std::size_t(from) * width),
        v.begin() + std::ptrdiff_t(std::size_t(from + count) * width));
  };
  std::vector<std::uint16_t> split_out;
  for (int from = 0; const int count : parts) {
    const auto out = device.run(pack_rows(one_slot, {count}),
                                part(qkvz, std::size_t(shape.qkvz_width()), from, count),
                                part(ba, std::size_t(shape.ba_width()), from, count), split, false);
    split_out.insert(split_out.end(), out.begin(), out.end());
    from += count;
  }
  bool split_same = split.conv == whole.conv;
  if (chunked) {
    std::vector<float> want(whole_out.size());
    const auto s = std::size_t(slot[0]);
    const auto qkvzf = floats(qkvz), baf = floats(ba);
    kernels::gated_deltanet_mix_ref(shape, prompt, qkvzf, baf, ref_params,
                                    {prompt_ref.conv.data() + s * conv_floats, conv_floats},
                                    {prompt_ref.state.data() + s * state_floats, state_floats},
                                    want, false);
    split_same = split_same && relative_l2(want, floats(whole_out)) <= 1e-2 &&
                 relative_l2(want, floats(split_out)) <= 1e-2 &&
                 relative_l2(prompt_ref.state, whole.state) <= 1e-2 &&
                 relative_l2(prompt_ref.state, split.state) <= 1e-2;
  } else {
    split_same = split_same && split_out == whole_out && split.state == whole.state;
  }
  char detail[320];
  std::snprintf(detail, sizeof detail,
                "%d/%d heads, %dx%d, conv %d, rows %d: out rel %.2e, state rel %.2e, conv %s, "
                "other slots %s, graph %s, split prompt %s%s",
                c.k_heads, c.v_heads, c.k_dim, c.v_dim, c.conv_kernel, nrows, worst_out, state_err,
                conv_same ? "bitwise" : "DIFFERS", untouched ? "untouched" : "WRITTEN",
                graph_same ? "same bits" : "DIFFERS",
                split_same ? (chunked ? "within 1e-2" : "same bits") : "DIFFERS",
                chunked ? ", chunked form" : "");
  // The chunked form's state passes through BF16 operands (W S, K^T U'): METHOD.md's BF16 bound.
  const double state_bound = chunked ? 1e-2 : 1e-4;
  results.record(worst_out <= 1e-2 && state_err <= state_bound && conv_same && untouched &&
                     graph_same && split_same,
                 c.name, detail);
}

// Verify rows (GatedDeltaNetRow::snapshot, speculative decoding's rollback): one launch of a
// decode row, a verify row of 5 tokens, a prompt row of 9 and a verify row of 8 tokens (more than
// the 6 snapshots a slot holds) in shuffled slots from random states. Each verify row's snapshot
// j against the reference run token by token to its token j (conv windows bitwise, states within
// 1e-4); snapshots past a row's tokens (or the room) and other slots' left as they were (NaN);
// the outputs and live states the bits of the same launch without snapshots (the kernel's form
// that decode graphs and prompts run).
void check_snapshots(gpu_test::Results& results, std::mt19937_64& rng, const Case& c) {
  GatedDeltaNetShape shape;
  shape.heads = {c.k_heads, c.v_heads, c.k_dim, c.v_dim};
  shape.conv_kernel = c.conv_kernel;
  constexpr int kSlots = 5, kMaxSnapshots = 6;
  const auto conv_floats = std::size_t(shape.conv_state_floats());
  const auto state_floats = std::size_t(shape.heads.state_floats());
  const LayerParams layer = random_layer_params(rng, c, shape);
  const auto& conv_w = layer.conv_w;
  const auto &A_log = layer.A_log, &dt_bias = layer.dt_bias, &norm_w = layer.norm_w;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Pool start{std::vector<float>(conv_floats * kSlots), std::vector<float>(state_floats * kSlots)};
  for (auto& x : start.conv) x = bf16_to_float(float_to_bf16(normal(rng)));
  for (auto& x : start.state) x = 0.1f * normal(rng);
  std::vector<std::int32_t> slot(kSlots);
  std::iota(slot.begin(), slot.end(), 0);
  std::shuffle(slot.begin(), slot.end(), rng);
  const std::vector<int> counts = {1, 5, 9, 8};
  std::vector<kernels::GatedDeltaNetRow> rows = pack_rows(slot, counts);
  rows[1].snapshot = rows[3].snapshot = 1;
  const int tokens = rows.back().first + rows.back().count;
  const auto qkvz = random_bf16(rng, std::size_t(tokens * shape.qkvz_width()), 1.0f);
  const auto ba = random_bf16(rng, std::size_t(tokens * shape.ba_width()), 2.0f);

  Device<std::uint16_t> d_conv_w(conv_w.size()), d_qkvz(qkvz.size()), d_ba(ba.size()),
      d_out(std::size_t(tokens) * std::size_t(shape.value_dim()));
  Device<float> d_A(A_log.size()), d_dt(dt_bias.size()), d_norm(norm_w.size());
  Device<float> d_conv(start.conv.size()), d_state(start.state.size());
  Device<float> d_snap_conv(conv_floats * kSlots * kMaxSnapshots),
      d_snap_state(state_floats * kSlots * kMaxSnapshots);
  Device<kernels::GatedDeltaNetRow> d_rows(rows.size());
  d_conv_w.upload(conv_w);
  d_A.upload(A_log);
  d_dt.upload(dt_bias);
  d_norm.upload(norm_w);
  d_qkvz.upload(qkvz);
  d_ba.upload(ba);
  d_rows.upload(rows);
  const kernels::GatedDeltaNetDeviceParams params{d_conv_w.ptr, d_A.ptr, d_dt.ptr, d_norm.ptr,
                                                  1e-6f};
  // One launch with snapshots, one without, from the same states.
  auto launch = [&](bool snapshots) {
    d_conv.upload(start.conv);
    d_state.upload(start.state);
    NIBBLE_CUDA_CHECK(cudaMemset(d_out.ptr, 0xFF, d_out.n * sizeof(std::uint16_t)));
    NIBBLE_CUDA_CHECK(cudaMemset(d_snap_conv.ptr, 0xFF, d_snap_conv.n * sizeof(float)));
    NIBBLE_CUDA_CHECK(cudaMemset(d_snap_state.ptr, 0xFF, d_snap_state.n * sizeof(float)));
    kernels::GatedDeltaNetDeviceState st{d_conv.ptr, d_state.ptr};
    if (snapshots) {
      st.snapshot_conv = d_snap_conv.ptr;
      st.snapshot_recurrent = d_snap_state.ptr;
      st.max_snapshots = kMaxSnapshots;
    }
    NIBBLE_CUDA_CHECK(kernels::gated_deltanet_mix(shape, d_rows.ptr, int(rows.size()), d_qkvz.ptr,
                                                  d_ba.ptr, params, st, d_out.ptr, nullptr));
    NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
    return std::pair{d_out.download(), Pool{d_conv.download(), d_state.download()}};
  };
  const auto [plain_out, plain] = launch(false);
  const auto [out, live] = launch(true);
  const std::vector<float> snap_conv = d_snap_conv.download(), snap_state = d_snap_state.download();
  const bool same_as_plain =
      out == plain_out && live.conv == plain.conv && live.state == plain.state;

  const std::vector<float> conv_wf = floats(conv_w);
  const kernels::GatedDeltaNetParams ref_params{conv_wf, A_log, dt_bias, norm_w, 1e-6f};
  const auto qkvzf = floats(qkvz), baf = floats(ba);
  double worst_state = 0.0;
  bool conv_bitwise = true, rest_untouched = true;
  std::vector<bool> written(std::size_t(kSlots * kMaxSnapshots), false);
  for (const auto& row : rows) {
    if (row.snapshot == 0) continue;
    const auto s = std::size_t(row.slot);
    std::vector<float> conv(start.conv.begin() + std::ptrdiff_t(s * conv_floats),
                            start.conv.begin() + std::ptrdiff_t((s + 1) * conv_floats));
    std::vector<float> state(start.state.begin() + std::ptrdiff_t(s * state_floats),
                             start.state.begin() + std::ptrdiff_t((s + 1) * state_floats));
    std::vector<float> out_t(std::size_t(shape.value_dim()));
    for (int j = 0; j < std::min(row.count, kMaxSnapshots); ++j) {
      const auto t = std::size_t(row.first + j);
      kernels::gated_deltanet_mix_ref(
          shape, 1,
          {qkvzf.data() + t * std::size_t(shape.qkvz_width()), std::size_t(shape.qkvz_width())},
          {baf.data() + t * std::size_t(shape.ba_width()), std::size_t(shape.ba_width())},
          ref_params, conv, state, out_t, false);
      const std::size_t kept = s * kMaxSnapshots + std::size_t(j);
      written[kept] = true;
      conv_bitwise &= std::equal(conv.begin(), conv.end(),
                                 snap_conv.begin() + std::ptrdiff_t(kept * conv_floats));
      const std::vector<float> got(snap_state.begin() + std::ptrdiff_t(kept * state_floats),
                                   snap_state.begin() + std::ptrdiff_t((kept + 1) * state_floats));
      worst_state = std::max(worst_state, relative_l2(state, got));
    }
  }
  for (std::size_t kept = 0; kept < written.size(); ++kept) {
    if (written[kept]) continue;
    for (std::size_t i = 0; i < conv_floats; ++i)
      rest_untouched &= std::isnan(snap_conv[kept * conv_floats + i]);
    for (std::size_t i = 0; i < state_floats; ++i)
      rest_untouched &= std::isnan(snap_state[kept * state_floats + i]);
  }
  char detail[320];
  std::snprintf(detail, sizeof detail,
                "%d/%d heads, %dx%d, conv %d: snapshot states rel %.2e, conv windows %s, other "
                "snapshots %s, outputs and live states %s",
                c.k_heads, c.v_heads, c.k_dim, c.v_dim, c.conv_kernel, worst_state,
                conv_bitwise ? "bitwise" : "DIFFER", rest_untouched ? "untouched" : "WRITTEN",
                same_as_plain ? "the bits of the launch without snapshots" : "DIFFER");
  results.record(worst_state <= 1e-4 && conv_bitwise && rest_untouched && same_as_plain,
                 std::string("snapshots, ") + c.name, detail);
}

void check_refusals(gpu_test::Results& results) {
  GatedDeltaNetShape bad;
  bad.heads = {2, 4, 96, 128};  // k_dim 96: no kernel
  const cudaError_t err =
      kernels::gated_deltanet_mix(bad, nullptr, 1, nullptr, nullptr, {}, {}, nullptr, nullptr);
  GatedDeltaNetShape wide;
  wide.heads = {1, 4, 128, 128};  // 512 threads
  const cudaError_t err2 =
      kernels::gated_deltanet_mix(wide, nullptr, 1, nullptr, nullptr, {}, {}, nullptr, nullptr);
  // The chunked form: no kernel for k_dim 96; a workspace short of what the tokens need.
  GatedDeltaNetShape ok;
  ok.heads = {2, 4, 128, 128};
  const kernels::GatedDeltaNetRow row{0, 0, 64};
  Device<kernels::GatedDeltaNetRow> d_row(1);
  d_row.upload({row});
  Device<std::uint16_t> any(1);
  Device<float> anyf(1);
  const kernels::GatedDeltaNetDeviceParams params{any.ptr, anyf.ptr, anyf.ptr, anyf.ptr, 1e-6f};
  const std::size_t need = kernels::gated_deltanet_chunked_workspace_bytes(ok, 64);
  const cudaError_t err3 =
      kernels::gated_deltanet_mix_chunked(bad, d_row.ptr, 1, 64, 64, any.ptr, any.ptr, params,
                                          {anyf.ptr, anyf.ptr}, {any.ptr, need}, any.ptr, nullptr);
  const cudaError_t err4 = kernels::gated_deltanet_mix_chunked(
      ok, d_row.ptr, 1, 64, 64, any.ptr, any.ptr, params, {anyf.ptr, anyf.ptr}, {any.ptr, need - 1},
      any.ptr, nullptr);
  results.record(err == cudaErrorInvalidValue && err2 == cudaErrorInvalidValue &&
                     err3 == cudaErrorInvalidValue && err4 == cudaErrorInvalidValue && need > 0 &&
                     kernels::gated_deltanet_chunked_workspace_bytes(bad, 64) == 0,
                 "refusals",
                 "unsupported k_dim and block width refused; the chunked form's k_dim 96 and "
                 "short workspace too");
  (void)cudaGetLastError();
}

}  // namespace
}  // namespace nibble

int main(int argc, char** argv) {
  const std::string no_gpu = nibble::gpu_test::no_gpu_reason();
  if (!no_gpu.empty()) {
    std::printf("skipped: %s\n", no_gpu.c_str());
    return nibble::gpu_test::kSkipExitCode;
  }
  if (argc > 1 && std::strcmp(argv[1], "--bench") == 0)
    return nibble::gpu_test::run_reporting_failures(
        [](int, char**) {
          nibble::gpu_test::run_gated_deltanet_bench();
          return 0;
        },
        argc, argv);
  return nibble::gpu_test::run_reporting_failures(
      [](int, char**) {
        std::mt19937_64 rng(nibble::gpu_test::test_seed());
        nibble::gpu_test::Results results;
        const nibble::Case cases[] = {
            {"tiny 1/1 64x64", 1, 1, 64, 64, 4, 1},
            {"2/4 32x32, 3 rows", 2, 4, 32, 32, 4, 3},
            {"4/8 128x64, conv 2", 4, 8, 128, 64, 2, 5},
            {"2/4 128x128, 8 rows", 2, 4, 128, 128, 4, 8},
            {"Qwen3-Next-80B 16/32 128x128", 16, 32, 128, 128, 4, 1},
            {"Qwen3-Next-80B 16/32 128x128, 4 rows", 16, 32, 128, 128, 4, 4},
            // Rows of >= 64 tokens through the chunked form, the rest recurrent; with 1, every
            // row (decode steps too); 32x32 has no chunked kernel (recurrent for all).
            {"chunked 1/1 64x64", 1, 1, 64, 64, 4, 3, 64},
            {"chunked 2/4 128x64, conv 2", 2, 4, 128, 64, 2, 5, 64},
            {"chunked 2/4 64x128", 2, 4, 64, 128, 4, 4, 64},
            {"chunked 2/4 128x128, 8 rows", 2, 4, 128, 128, 4, 8, 64},
            {"chunked every row 2/4 128x128", 2, 4, 128, 128, 4, 3, 1},
            {"chunked 2/4 32x32 (recurrent fallback)", 2, 4, 32, 32, 4, 3, 64},
            {"chunked Qwen3-Next-80B 16/32 128x128, 2 rows", 16, 32, 128, 128, 4, 2, 64},
        };
        for (const auto& c : cases) nibble::check_case(results, rng, c);
        for (const auto& c : {cases[1], cases[2], cases[4]})
          nibble::check_snapshots(results, rng, c);
        nibble::check_refusals(results);
        return results.exit_code();
      },
      argc, argv);
}

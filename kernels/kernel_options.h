#pragma once
// The kernels' A/B switches and fallbacks, as plain structs: parsed once by a caller (the engine's
// command line, engine/backend/backend_options.h; the kernel bench; the tests) and passed down
// with every call. No CUDA here, so that code built without CUDA can hold and parse them. The
// defaults are the production forms (docs/tuning.md).

namespace nibble::kernels {

// The linears' A/B switches and fallbacks, parsed once by the caller (engine CLI, kernel bench)
// and passed to query_device_traits; the defaults are the production forms.
struct LinearOptions {
  // Plan the warpgroup-MMA tiles where the device runs them (false: the mma.sync tiles only, to
  // measure them against the wgmma ones).
  bool wgmma = true;
  // Sum a warpgroup-MMA launch's K splits in a (1, 1, splits) cluster (false: through the
  // workspace's atomics, the form before PERF_NOTES v30).
  bool wgmma_cluster_sum = true;
  // A one-wave slice grid whose blocks request all of K at their start may cover the SMs unevenly
  // (decode_slice_tile; false keeps the evenness rule there too).
  bool slice_short_k = true;
};

// The attention kernels' A/B switches and fallbacks, parsed once by the caller (engine CLI, tests,
// benchmarks) and passed with every call (PagedAttentionArgs::options, and to the planners below);
// the defaults are the production forms.
struct AttentionOptions {
  // Prefill chunks and mixed steps on the flash kernel (flash_prefill.h); false: the FP32 tile
  // kernel (an FP8 cache still takes the flash kernel).
  bool flash = true;
  // Steps of decodes only on the flash kernel where it serves the shape (and `flash`); false: the
  // CUDA-core decode kernel. Below decode_attention, which comes first.
  bool flash_decode = true;
  // Steps of decodes only on the decode attention kernel (decode_attention.h) where it serves the
  // shape; false: the choice above.
  bool decode_attention = true;
  // The decode attention kernel as a dependent launch, its cache rows asked of the L2 before the
  // wait; false: a plain launch after the kernel before has ended.
  bool decode_overlap = true;
  // The decode attention split rule's blocks a multiprocessor at long contexts
  // (decode_attention_plan.h, 1..8; other values: its kBlocksPerSm). A graph bucket and its calls
  // must use the same value.
  int decode_blocks_per_sm = 0;
};

// The per-row launchers' switches (rms_norm, rms_norm_rows, rope_and_store_kv, silu_mul*),
// parsed once by the caller and passed to each call; the defaults are the production forms.
struct LayerOptions {
  // Decode-sized launches (up to 16 rows) go out with programmatic dependent launch
  // (kernels/dependent_launch.cuh); false: plain launches (A/B).
  bool small_overlap = true;
};

}  // namespace nibble::kernels

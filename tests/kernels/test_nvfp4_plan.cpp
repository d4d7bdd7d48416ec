// The NVFP4 linear dispatcher's choices (kernels/nvfp4_linear.h) and the shared-memory request
// that keeps an overlapping grid evenly spread (kernels/nvfp4/even_spread.h): host logic only,
// no GPU needed.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>

#include "kernels/nvfp4/even_spread.h"
#include "kernels/nvfp4_linear.h"

namespace nibble::kernels {
namespace {

// H100 SXM and GB10 (DGX Spark) as cudaDeviceGetAttribute reports them.
constexpr DeviceTraits kH100{132, 9, 0, 233472};
constexpr DeviceTraits kGb10{48, 12, 1, 102400};

struct Layer {
  const char* name;
  std::int64_t n, k;
};
// Llama-3.1-8B's linear layers (q/k/v and gate/up fused).
constexpr Layer kLlama[] = {
    {"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};

// The H100 plan of each Llama layer at each m: the expected slice tile, K never split.
void expect_llama_slices(std::initializer_list<std::int64_t> ms, const W4A16Tile (&expected)[4]) {
  for (std::int64_t m : ms) {
    for (int i = 0; i < 4; ++i) {
      const auto plan = plan_nvfp4_linear(m, kLlama[i].n, kLlama[i].k, kH100);
      EXPECT_EQ(plan.tile, expected[i]) << kLlama[i].name << " m=" << m;
      EXPECT_EQ(plan.splits, 1) << kLlama[i].name;
    }
  }
}

TEST(Nvfp4Plan, DecodeOnH100TakesTheSliceTilesThatFillTheSmsEvenly) {
  expect_llama_slices({1, 2, 4}, {W4A16Tile::kSlice16, W4A16Tile::kSlice32Wide, W4A16Tile::kSlice32,
                                  W4A16Tile::kSlice16Wide});
}

TEST(Nvfp4Plan, SliceGridsRunInOneEvenWaveOrInFullWaves) {
  for (const DeviceTraits& device : {kH100, kGb10}) {
    for (std::int64_t m = 1; m <= 8; ++m) {
      for (const Layer& layer : kLlama) {
        const auto plan = plan_nvfp4_linear(m, layer.n, layer.k, device);
        if (!w4a16_is_slice(plan.tile)) {
          EXPECT_EQ(plan.tile, W4A16Tile::kM8) << layer.name << " m=" << m;
          continue;
        }
        const std::int64_t blocks = (layer.n + 127) / 128 * 128 / w4a16_slice_rows(plan.tile);
        const std::int64_t busiest = (blocks + device.sm_count - 1) / device.sm_count;
        const std::int64_t fit = std::min<std::int64_t>(
            w4a16_resident_blocks(plan.tile),
            device.smem_per_sm / (w4a16_slice_smem_bytes(plan.tile, m) + 1024));
        if (busiest > fit) {
          // Several waves: only the 8-warp 32-row slice, with its waves mostly full.
          EXPECT_EQ(plan.tile, W4A16Tile::kSlice32Wide) << layer.name << " m=" << m;
          const std::int64_t slots = fit * device.sm_count;
          const std::int64_t waves = (blocks + slots - 1) / slots;
          EXPECT_GE(double(blocks) / double(waves * slots), kSliceMinWaveFill)
              << layer.name << " m=" << m << " sms=" << device.sm_count;
        } else if (blocks >= device.sm_count) {
          EXPECT_GE(double(blocks) / double(busiest * device.sm_count), kSliceMinEvenness)
              << layer.name << " m=" << m << " sms=" << device.sm_count;
        }
      }
    }
  }
}

TEST(Nvfp4Plan, GateUpAtEightRowsTakesEightWarpSlicesOverFullWaves) {
  // 4-warp 32-row slices at m = 8 need 35 KB each: 6 per SM, not the 7 an even wave of 896 needs;
  // the 8-warp ones run 2 per SM, in 4 waves 85% full.
  EXPECT_EQ(plan_nvfp4_linear(8, 28672, 4096, kH100).tile, W4A16Tile::kSlice32Wide);
  EXPECT_EQ(plan_nvfp4_linear(6, 28672, 4096, kH100).tile, W4A16Tile::kSlice32);
  EXPECT_EQ(plan_nvfp4_linear(8, 6144, 4096, kH100).tile, W4A16Tile::kSlice16);
}

TEST(Nvfp4Plan, EightWarpSlicesForALongKAtTwoBlocksPerSm) {
  // down (K = 14336): 256 slices, 2 per SM, 28 k steps per warp of 8.
  EXPECT_EQ(plan_nvfp4_linear(8, 4096, 14336, kH100).tile, W4A16Tile::kSlice16Wide);
  // o (K = 4096): 8 k steps per warp of 8, so one 8-warp 32-row slice per SM instead.
  EXPECT_EQ(plan_nvfp4_linear(1, 4096, 4096, kH100).tile, W4A16Tile::kSlice32Wide);
  EXPECT_EQ(plan_nvfp4_linear(1, 4096, 8192, kH100).tile, W4A16Tile::kSlice16Wide);
  // qkv-sized grids (3 per SM) keep 4 warps whatever K is.
  EXPECT_EQ(plan_nvfp4_linear(1, 6144, 16384, kH100).tile, W4A16Tile::kSlice16);
}

TEST(Nvfp4Plan, SmallLayersTakeEightWarpSlicesWithFewerBlocksThanSms) {
  // Qwen3-30B-A3B experts: 96 and 128 slices for 132 SMs, one per SM: 8 warps each.
  EXPECT_EQ(plan_nvfp4_linear(1, 1536, 2048, kH100).tile, W4A16Tile::kSlice16Wide);
  EXPECT_EQ(plan_nvfp4_linear(4, 2048, 768, kH100).tile, W4A16Tile::kSlice16Wide);
}

TEST(Nvfp4Plan, AnUnevenWaveKeepsSplitK) {
  // 17408 rows: 1088 16-row slices do not fit in one wave; 544 32-row ones put 5 on some SMs
  // and 4 on others (82% even); 544 8-warp ones fill 3 waves of 264 to 69%.
  const auto plan = plan_nvfp4_linear(1, 17408, 4096, kH100);
  EXPECT_EQ(plan.tile, W4A16Tile::kM8);
  EXPECT_GT(plan.splits, 1);
}

TEST(Nvfp4Plan, AShortKTakesAOneWaveSliceEvenIfUneven) {
  // Qwen3-30B-A3B qkv (K = 2048: 32 k steps, all in the 16-row slice's 4 rings of 8): 320 slices,
  // 3 on some SMs and 2 on others, instead of split-K.
  for (std::int64_t m : {1, 2, 4, 8}) {
    const auto plan = plan_nvfp4_linear(m, 5120, 2048, kH100);
    EXPECT_EQ(plan.tile, W4A16Tile::kSlice16) << "m=" << m;
    EXPECT_EQ(plan.splits, 1);
  }
  // The A/B switch keeps the evenness rule.
  DeviceTraits even = kH100;
  even.short_k_uneven = false;
  EXPECT_EQ(plan_nvfp4_linear(1, 5120, 2048, even).tile, W4A16Tile::kM8);
  // A long K still needs the even wave.
  EXPECT_EQ(plan_nvfp4_linear(1, 5120, 4096, kH100).tile, W4A16Tile::kM8);
}

TEST(Nvfp4Plan, NineToSixteenRowsTakeThirtyTwoRowSlices) {
  // 16-row slices would read x 3.6x the weight bytes; 8 warps where one slice per SM covers N.
  expect_llama_slices({9, 12, 16}, {W4A16Tile::kSlice32, W4A16Tile::kSlice32Wide,
                                    W4A16Tile::kSlice32, W4A16Tile::kSlice32Wide});
  // Qwen3-30B-A3B experts: fewer 16-row slices than SMs.
  EXPECT_EQ(plan_nvfp4_linear(16, 1536, 2048, kH100).tile, W4A16Tile::kSlice16Wide);
  EXPECT_EQ(plan_nvfp4_linear(16, 2048, 768, kH100).tile, W4A16Tile::kSlice16Wide);
}

TEST(Nvfp4Plan, BatchSlicesFitAndTakeAtMostTwoWaves) {
  for (const DeviceTraits& device : {kH100, kGb10}) {
    for (std::int64_t m = 9; m <= 16; ++m) {
      for (std::int64_t n : {1536, 2048, 4096, 6144, 28672, 128256}) {
        const auto plan = plan_nvfp4_linear(m, n, 4096, device);
        if (!w4a16_is_slice(plan.tile)) {
          EXPECT_EQ(plan.tile, W4A16Tile::kM16Swap) << n << " m=" << m;
          continue;
        }
        const std::int64_t blocks = (n + 127) / 128 * 128 / w4a16_slice_rows(plan.tile);
        const std::int64_t fit = std::min<std::int64_t>(
            w4a16_resident_blocks(plan.tile),
            device.smem_per_sm / (w4a16_slice_smem_bytes(plan.tile, m) + 1024));
        EXPECT_GE(fit, 1) << n << " m=" << m << " sms=" << device.sm_count;
        EXPECT_LE(blocks, 2 * fit * device.sm_count) << n << " m=" << m;
      }
    }
  }
  // A vocabulary-sized output (Llama-3.1 lm_head): 4008 32-row slices, past two waves.
  EXPECT_EQ(plan_nvfp4_linear(16, 128256, 4096, kH100).tile, W4A16Tile::kM16Swap);
}

TEST(Nvfp4Plan, LargerBatchesUseTheOtherTiles) {
  EXPECT_EQ(plan_nvfp4_linear(64, 6144, 4096, kH100).tile, W4A16Tile::kM64);
  EXPECT_EQ(plan_nvfp4_linear(2048, 6144, 4096, kH100).tile, W4A16Tile::kM128);
}

TEST(Nvfp4Plan, OverlapIsAPermissionTheLargeTilesDecline) {
  EXPECT_FALSE(plan_nvfp4_linear(1, 6144, 4096, kH100).overlap);
  EXPECT_TRUE(plan_nvfp4_linear(1, 6144, 4096, kH100, true).overlap);
  EXPECT_TRUE(plan_nvfp4_linear(16, 6144, 4096, kH100, true).overlap);
  EXPECT_FALSE(plan_nvfp4_linear(256, 6144, 4096, kH100, true).overlap);
  // The warpgroup-MMA tiles take it for one-wave grids up to 256 rows (one block an SM: it hides
  // the launch and the first weight fetches; at 512 it slowed gate_up and down; H200, PERF_NOTES
  // v32).
  DeviceTraits hopper = kH100;
  hopper.wgmma = true;
  EXPECT_TRUE(plan_nvfp4_linear(256, 6144, 4096, hopper, true).overlap);
  EXPECT_FALSE(plan_nvfp4_linear(256, 6144, 4096, hopper, false).overlap);
  // Nor for a grid of two waves: gate_up's 224 256-row blocks on 132 SMs.
  const Nvfp4LinearPlan gate_up = plan_nvfp4_linear(256, 28672, 4096, hopper, true);
  EXPECT_EQ(gate_up.tile, W4A16Tile::kWgmma256);
  EXPECT_FALSE(gate_up.overlap);
  EXPECT_TRUE(w4a16_is_wgmma(plan_nvfp4_linear(512, 28672, 4096, hopper, true).tile));
  EXPECT_FALSE(plan_nvfp4_linear(512, 28672, 4096, hopper, true).overlap);
}

// H100: 228 KB per SM, 1 KB reserved per block, 227 KB per block.
constexpr SmemBudget kH100Smem{132, 233472, 1024, 232448 - 1024};

TEST(EvenSpread, AnSmHoldsNoMoreBlocksThanAnEvenSpreadGivesIt) {
  for (std::int64_t blocks : {133, 256, 384, 896, 1056}) {
    for (int needed : {20 * 1024, 25 * 1024}) {
      const int smem = even_spread_smem(needed, blocks, kH100Smem);
      const std::int64_t even = (blocks + 131) / 132;
      const std::int64_t fit = kH100Smem.per_sm / (smem + kH100Smem.reserved_per_block);
      EXPECT_GE(smem, needed);
      EXPECT_EQ(smem % 128, 0);
      // Unless the blocks' own needs already cap an SM below the even share.
      const std::int64_t own = kH100Smem.per_sm / (needed + kH100Smem.reserved_per_block);
      EXPECT_EQ(fit, std::min(even, own)) << blocks << " blocks, " << needed << " B";
    }
  }
}

TEST(EvenSpread, LeavesTheRequestAloneWhereItCannotHelp) {
  // Needs more than the spread would give; an unknown device; a spread past 227 KB per block.
  EXPECT_EQ(even_spread_smem(100 * 1024, 384, kH100Smem), 100 * 1024);
  EXPECT_EQ(even_spread_smem(1000, 384, SmemBudget{}), 1000);
  const SmemBudget small_blocks{132, 233472, 1024, 64 * 1024};
  EXPECT_EQ(even_spread_smem(1000, 132, small_blocks), 1000);  // one per SM needs 114 KB
}

// Split K summed in a cluster: a launch runs its output tiles in waves of as many clusters as the
// device holds, fewer than SM slots / splits where the GPCs leave slots over. The cluster counts
// are an H200's (nibble-kernel-bench, 2026-11-29), the expected tile and split the fastest of
// that day's sweeps over 1..8 splits of both tiles on each layer (06:28 and 09:40 UTC).
TEST(Nvfp4Plan, WgmmaSplitsCountTheClustersThatFitAWave) {
  DeviceTraits hopper = kH100;
  hopper.wgmma = true;
  const auto plan = [&](std::int64_t m, const Layer& layer) {
    return plan_nvfp4_linear(m, layer.n, layer.k, hopper, false, nullptr);
  };
  const Layer &qkv = kLlama[0], &o = kLlama[1], &gate_up = kLlama[2], &down = kLlama[3];
  // Unknown cluster counts (0): splits summed through the workspace, within one wave of SM
  // slots: down at M = 256 as 32 256-row tiles split 4 ways (128 blocks of 132).
  EXPECT_EQ(plan(256, down).tile, W4A16Tile::kWgmma256);
  EXPECT_EQ(plan(256, down).splits, 4);

  const int per_size_128[9] = {0, 0, 132, 79, 62, 47, 39, 32, 30};
  const int per_size_256[9] = {0, 0, 66, 39, 30, 22, 17, 15, 15};
  for (int s = 0; s < 9; ++s) {
    hopper.wgmma_clusters[0][s] = per_size_128[s];
    hopper.wgmma_clusters[1][s] = per_size_256[s];
  }
  // Measured there, us per split count: down at M = 256, 128 rows 1: 101.4, 2: 55.6, 3: 60.9,
  // 4: 78.6 (a wave of 62 clusters and a tail of 2), 7: 64.1; 256 rows 2: 74.4, 3: 52.9 (09:40:
  // 128 rows 2: 54.7, 256 rows 3: 52.9). qkv at
  // M = 256, 128 rows 2: 30.2, 256 rows 2: 28.1; gate_up at M = 256 128 rows 1: 104.9, 256 rows
  // 1: 92.1; at M = 512 128 rows 1: 197.4, 256 rows 1: 214.1, 2: 226.3.
  struct Case {
    std::int64_t m;
    const Layer* layer;
    W4A16Tile tile;
    int splits;
  };
  const W4A16Tile w128 = W4A16Tile::kWgmma128, w256 = W4A16Tile::kWgmma256;
  for (const Case& c :
       {Case{256, &qkv, w256, 2}, Case{256, &o, w128, 2}, Case{256, &gate_up, w256, 1},
        Case{256, &down, w256, 3}, Case{512, &qkv, w256, 1}, Case{512, &o, w256, 2},
        Case{512, &gate_up, w128, 1}, Case{512, &down, w256, 2}}) {
    const Nvfp4LinearPlan p = plan(c.m, *c.layer);
    EXPECT_EQ(p.tile, c.tile) << c.layer->name << " M=" << c.m;
    EXPECT_EQ(p.splits, c.splits) << c.layer->name << " M=" << c.m;
  }
  // A layer whose lone blocks would leave most SMs idle splits further where the clusters fit:
  // 16 tiles of K = 14336 (N = 2048) at M = 128.
  EXPECT_GT(plan(128, Layer{"narrow", 2048, 14336}).splits, 4);
}

// The dense path (dequantise-then-cuBLAS, where the caller offers it) against the warpgroup-MMA
// tiles, as measured on an H200 with Llama-3.1-8B's layers (docs/performance.md, 2026-11-26 for
// M >= 1024, 2026-11-29 for the tiles winning every layer at M = 256 and 512).
TEST(Nvfp4Plan, DensePathTakesBatchesFromOneThousandTwentyFourRows) {
  DeviceTraits hopper = kH100;
  hopper.wgmma = true;
  Nvfp4DenseOption dense;
  std::uint16_t never_read[8];  // the planner looks at the scratch's size only
  dense.scratch.weight = never_read;
  dense.scratch.weight_elements = std::size_t(28672) * 4096;  // the widest layer, gate_up
  auto plan = [&](std::int64_t m, std::int64_t n, std::int64_t k, bool offered) {
    return plan_nvfp4_linear(m, n, k, hopper, false, offered ? &dense : nullptr);
  };
  // o (4096 x 4096, 17 M weights) and qkv (6144 x 4096, 25 M): a warpgroup tile at 256 (qkv:
  // 256 rows, 2 K splits), dense from 1024.
  EXPECT_FALSE(plan(256, 4096, 4096, true).dense);
  EXPECT_TRUE(plan(1024, 4096, 4096, true).dense);
  EXPECT_FALSE(plan(64, 4096, 4096, true).dense);  // below kNvfp4DenseMinRows
  const Nvfp4LinearPlan qkv = plan(256, 6144, 4096, true);
  EXPECT_FALSE(qkv.dense);
  EXPECT_EQ(qkv.tile, W4A16Tile::kWgmma256);
  EXPECT_EQ(qkv.splits, 2);
  EXPECT_TRUE(plan(1024, 6144, 4096, true).dense);
  // gate_up (28672 x 4096) and down (4096 x 14336): the 256-row warpgroup tile at 256 (gate_up
  // unsplit; down, without cluster counts, split 4 ways within one wave), dense from 1024.
  const Nvfp4LinearPlan gate_up = plan(256, 28672, 4096, true), down = plan(256, 4096, 14336, true);
  EXPECT_FALSE(gate_up.dense);
  EXPECT_EQ(gate_up.tile, W4A16Tile::kWgmma256);
  EXPECT_EQ(gate_up.splits, 1);
  EXPECT_FALSE(down.dense);
  EXPECT_EQ(down.tile, W4A16Tile::kWgmma256);
  EXPECT_EQ(down.splits, 4);
  EXPECT_TRUE(plan(2048, 28672, 4096, true).dense);
  EXPECT_TRUE(plan(8192, 4096, 14336, true).dense);
  // Not offered, or a scratch smaller than one 128-row group: never dense.
  EXPECT_FALSE(plan(8192, 4096, 14336, false).dense);
  dense.scratch.weight_elements = 100;
  EXPECT_FALSE(plan(8192, 4096, 14336, true).dense);
}

}  // namespace
}  // namespace nibble::kernels

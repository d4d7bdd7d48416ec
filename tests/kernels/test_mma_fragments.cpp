// kernels/linear_attention/mma_fragments.h against the PTX ISA's fragment layouts, emulated on
// the CPU: ldmatrix.x4 (each lane's row address; thread t gets row t/4, columns 2(t%4), +1 of each
// 8x8 matrix, or with .trans rows 2(t%4), +1 of column t/4) feeding mma.sync.m16n8k16 (A regs
// {a0,a1} row g cols 2q.., {a2,a3} row g+8, {a4,a5} row g cols 2q+8.., {a6,a7} row g+8; B
// {b0,b1} rows 2q, 2q+1 of column g, {b2,b3} rows 2q+8, 2q+9; C c0,c1 row g cols 2q, 2q+1, c2,c3
// row g+8; g = lane/4, q = lane%4). Each of the four stored layouts times a reference product.
#include "kernels/linear_attention/mma_fragments.h"

#include <gtest/gtest.h>

#include <array>
#include <random>
#include <vector>

namespace nibble::kernels {
namespace {

using Regs = std::array<std::array<float, 8>, 32>;  // per thread: 4 registers of 2 values

// A row-major 16x16 tile, its (row, col) element.
struct Tile {
  std::vector<float> v = std::vector<float>(256);
  float operator()(int r, int c) const { return v[std::size_t(r * 16 + c)]; }
};

Regs ldmatrix_x4(const Tile& m, TileOffset (*lane_address)(int), bool trans) {
  Regs regs{};
  for (int t = 0; t < 32; ++t)
    for (int i = 0; i < 4; ++i) {
      auto row_address = [&](int r) { return lane_address(8 * i + r); };  // row r of matrix i
      for (int half = 0; half < 2; ++half) {
        float x;
        if (!trans) {
          const TileOffset o = row_address(t / 4);
          x = m(o.row, o.col + 2 * (t % 4) + half);
        } else {
          const TileOffset o = row_address(2 * (t % 4) + half);
          x = m(o.row, o.col + t / 4);
        }
        regs[std::size_t(t)][std::size_t(2 * i + half)] = x;
      }
    }
  return regs;
}

// The 16x8 product of an A fragment set and B registers (b0b1 in regs bo, bo + 1), FP32.
std::array<float, 128> mma(const Regs& a, const Regs& b, int bo) {
  float A[16][16], B[16][8];
  for (int t = 0; t < 32; ++t) {
    const int g = t / 4, q = t % 4;
    const auto& r = a[std::size_t(t)];
    for (int h = 0; h < 2; ++h) {
      A[g][2 * q + h] = r[std::size_t(0 + h)];
      A[g + 8][2 * q + h] = r[std::size_t(2 + h)];
      A[g][2 * q + 8 + h] = r[std::size_t(4 + h)];
      A[g + 8][2 * q + 8 + h] = r[std::size_t(6 + h)];
      B[2 * q + h][g] = b[std::size_t(t)][std::size_t(2 * bo + h)];
      B[2 * q + 8 + h][g] = b[std::size_t(t)][std::size_t(2 * (bo + 1) + h)];
    }
  }
  std::array<float, 128> c{};
  for (int t = 0; t < 32; ++t)
    for (int e = 0; e < 4; ++e) {
      const TileOffset o = mma_c_at(t, e);
      float sum = 0.0f;
      for (int k = 0; k < 16; ++k) sum += A[o.row][k] * B[k][o.col];
      c[std::size_t(o.row * 8 + o.col)] = sum;
    }
  return c;
}

Tile random_tile(std::mt19937& rng) {
  std::uniform_int_distribution<int> small(-4, 4);  // exact products and sums
  Tile t;
  for (auto& x : t.v) x = float(small(rng));
  return t;
}

Tile transpose(const Tile& m) {
  Tile t;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) t.v[std::size_t(c * 16 + r)] = m(r, c);
  return t;
}

TEST(MmaFragments, EachStoredLayoutGivesTheProduct) {
  std::mt19937 rng(7);
  const Tile A = random_tile(rng), B = random_tile(rng);  // A [m][k], B [k][n]: 16x16 each
  // A stored [m][k] or [k][m]; B stored [k][n] or [n][k].
  const Regs a_plain = ldmatrix_x4(A, ldsm_a_mk, false);
  const Regs a_trans = ldmatrix_x4(transpose(A), ldsm_a_km, true);
  const Regs b_trans = ldmatrix_x4(B, ldsm_b_kn, true);
  const Regs b_plain = ldmatrix_x4(transpose(B), ldsm_b_nk, false);
  for (const Regs* a : {&a_plain, &a_trans})
    for (const Regs* b : {&b_trans, &b_plain})
      for (int n8 = 0; n8 < 2; ++n8) {  // registers 0, 1: columns 0..7; 2, 3: 8..15
        const auto c = mma(*a, *b, 2 * n8);
        for (int m = 0; m < 16; ++m)
          for (int n = 0; n < 8; ++n) {
            float want = 0.0f;
            for (int k = 0; k < 16; ++k) want += A(m, k) * B(k, 8 * n8 + n);
            ASSERT_EQ(c[std::size_t(m * 8 + n)], want)
                << "A " << (a == &a_plain ? "[m][k]" : "[k][m]") << ", B "
                << (b == &b_trans ? "[k][n]" : "[n][k]") << ", columns " << 8 * n8 << "+, (" << m
                << ", " << n << ")";
          }
      }
}

// The accumulator positions cover the 16x8 tile once.
TEST(MmaFragments, AccumulatorPositionsCoverTheTile) {
  std::vector<int> seen(128, 0);
  for (int t = 0; t < 32; ++t)
    for (int e = 0; e < 4; ++e) {
      const TileOffset o = mma_c_at(t, e);
      ++seen[std::size_t(o.row * 8 + o.col)];
    }
  for (const int s : seen) EXPECT_EQ(s, 1);
}

}  // namespace
}  // namespace nibble::kernels

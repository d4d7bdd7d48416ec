#pragma once
// Random in-memory models for backend tests: every weight uniform from a seeded generator, linear
// layers scaled to keep activations near unit variance, norms near 1.
#include <cstdint>
#include <random>
#include <vector>

#include "engine/model/model_weights.h"

namespace nibble::backend::testing {

struct Rng {
  explicit Rng(std::uint64_t seed) : gen(seed) {}
  std::mt19937 gen;
  std::vector<float> values(std::int64_t n, float scale, float offset = 0.0f);
  model::Linear linear(std::int64_t out, std::int64_t in, bool bias = false);
};

model::ModelWeights random_model(const model::ModelConfig& c, std::uint64_t seed);

}  // namespace nibble::backend::testing

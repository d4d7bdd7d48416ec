// An EAGLE-3 head on the CPU backend against an independent reference: eagle3_reference.py (plain
// Python, vLLM's llama_eagle3.py written out) wrote eagle3_golden.json with a tiny head's weights,
// two steps' inputs (four positions reading the target's three hidden states through fc, then one
// chained on the head's own output) and the logits and pre-norm hidden states they give. Also
// the head's config.json keys, and which of the target's layers it reads.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/eagle3_head.h"
#include "engine/model/model_config.h"
#include "engine/model/model_description.h"
#include "engine/model/model_error.h"

namespace nibble::model {
namespace {

using nlohmann::json;

json golden() {
  std::ifstream in(NIBBLE_EAGLE3_GOLDEN);
  EXPECT_TRUE(in.good()) << NIBBLE_EAGLE3_GOLDEN;
  return json::parse(in);
}

Linear dense(const json& weights, const std::string& name, std::int64_t out, std::int64_t in) {
  Linear l;
  l.out_features = out;
  l.in_features = in;
  l.dense = weights.at(name).get<std::vector<float>>();
  EXPECT_EQ(l.dense.size(), std::size_t(out * in)) << name;
  return l;
}

// The golden head as ModelWeights, built field by field (not through the loader).
ModelWeights golden_head(const json& g) {
  ModelWeights m;
  m.config = parse_model_config(g["config"], "eagle3_golden.json");
  const ModelConfig& c = m.config;
  const json& w = g["weights"];
  const std::int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  m.embed = w.at("embed_tokens.weight").get<std::vector<float>>();
  LayerWeights l;
  l.input_norm = w.at("midlayer.input_layernorm.weight").get<std::vector<float>>();
  l.hidden_norm = w.at("midlayer.hidden_norm.weight").get<std::vector<float>>();
  l.post_attention_norm =
      w.at("midlayer.post_attention_layernorm.weight").get<std::vector<float>>();
  l.q = dense(w, "midlayer.self_attn.q_proj.weight", c.num_heads * D, 2 * H);
  l.k = dense(w, "midlayer.self_attn.k_proj.weight", c.num_kv_heads * D, 2 * H);
  l.v = dense(w, "midlayer.self_attn.v_proj.weight", c.num_kv_heads * D, 2 * H);
  l.o = dense(w, "midlayer.self_attn.o_proj.weight", H, c.num_heads * D);
  l.gate = dense(w, "midlayer.mlp.gate_proj.weight", I, H);
  l.up = dense(w, "midlayer.mlp.up_proj.weight", I, H);
  l.down = dense(w, "midlayer.mlp.down_proj.weight", H, I);
  m.layers.push_back(std::move(l));
  m.final_norm = w.at("norm.weight").get<std::vector<float>>();
  m.lm_head = dense(w, "lm_head.weight", c.eagle3->draft_vocab_size, H);
  m.eagle3.emplace();
  m.eagle3->fc = dense(w, "fc.weight", H, c.eagle3->fc_inputs());
  return m;
}

void expect_near_all(const std::vector<float>& got, const json& want, const std::string& what) {
  const auto ref = want.get<std::vector<double>>();
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (std::size_t i = 0; i < ref.size(); ++i)
    EXPECT_NEAR(got[i], ref[i], 2e-5 * (1.0 + std::fabs(ref[i]))) << what << " [" << i << "]";
}

TEST(Eagle3Head, MatchesTheIndependentReference) {
  const json g = golden();
  ModelWeights head = golden_head(g);
  const ModelConfig c = head.config;
  ASSERT_TRUE(c.eagle3.has_value());
  EXPECT_EQ(describe_model(c).input, ModelInput::kEagle3);
  auto backend = backend::make_cpu_backend(std::move(head), 1);
  auto cache = backend->new_kv_cache(4, 4);
  const std::vector<int> table = {0, 1, 2, 3};
  const std::vector<int> d2t = g["d2t"].get<std::vector<int>>();
  std::vector<int> drafted;
  for (const json& step : g["steps"]) {
    const auto tokens = step["tokens"].get<std::vector<int>>();
    const auto hidden_in = step["hidden_in"].get<std::vector<float>>();
    const std::size_t n = tokens.size();
    std::vector<float> logits(n * std::size_t(c.logits_size())),
        hidden_out(n * std::size_t(c.hidden_size));
    backend::BatchItem item;
    item.tokens = tokens;
    item.start = step["start"].get<int>();
    item.block_table = table;
    item.num_logits = int(n);
    item.logits = logits;
    item.hidden_in = hidden_in;
    item.hidden_out = hidden_out;
    backend->forward_batch(*cache, std::span(&item, 1));
    const std::string at = "step at position " + std::to_string(item.start);
    expect_near_all(logits, step["logits"], at + " logits");
    expect_near_all(hidden_out, step["hidden_out"], at + " pre-norm hidden state");
    for (std::size_t r = 0; r < n; ++r) {
      const auto row =
          std::span(logits).subspan(r * std::size_t(c.logits_size()), std::size_t(c.logits_size()));
      const int best = int(std::ranges::max_element(row) - row.begin());
      drafted.push_back(best + d2t[std::size_t(best)]);
    }
  }
  EXPECT_EQ(drafted, g["draft_target_ids"].get<std::vector<int>>());
}

// The public heads' config.json keys: draft_vocab_size, target_hidden_size, the aux layer ids at
// the top level or in eagle_config, and what the head cannot be.
TEST(Eagle3Head, ConfigKeysAsThePublicHeadsWriteThem) {
  json config = golden()["config"];
  ModelConfig c = parse_model_config(config, "head");
  ASSERT_TRUE(c.eagle3);
  EXPECT_EQ(c.arch, Arch::LlamaEagle3);
  EXPECT_EQ(c.eagle3->draft_vocab_size, 6);
  EXPECT_EQ(c.logits_size(), 6);
  EXPECT_EQ(c.eagle3->target_hidden_size, 6);
  EXPECT_EQ(c.eagle3->fc_inputs(), 18);
  EXPECT_EQ(c.eagle3->aux_layers, (std::vector<int>{1, 3, 5}));
  EXPECT_FALSE(c.eagle3->norm_before_residual);
  const ModelDescription d = describe_model(c);
  EXPECT_TRUE(d.layers[0].attention.reads_embedding);

  config.erase("eagle_aux_hidden_state_layer_ids");
  config.erase("target_hidden_size");
  config.erase("draft_vocab_size");
  config["architectures"] = {"Eagle3LlamaForCausalLM"};
  config["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", {17, 1, 33}},
                            {"use_aux_hidden_state", true}};
  config["norm_before_residual"] = true;
  c = parse_model_config(config, "head");
  EXPECT_EQ(c.eagle3->aux_layers, (std::vector<int>{1, 17, 33}));  // ascending, as vLLM collects
  EXPECT_EQ(c.eagle3->draft_vocab_size, c.vocab_size);
  EXPECT_EQ(c.eagle3->target_hidden_size, c.hidden_size);
  EXPECT_TRUE(describe_model(c).layers[0].attention.norm_before_residual);

  const auto refusal = [](json j) {
    try {
      (void)parse_model_config(j, "head");
    } catch (const ModelError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  json two_layers = config;
  two_layers["num_hidden_layers"] = 2;
  EXPECT_NE(refusal(two_layers).find("num_hidden_layers"), std::string::npos);
  json two_ids = config;
  two_ids["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = {1, 2};
  EXPECT_NE(refusal(two_ids).find("expected a list of three layer ids"), std::string::npos);
  json repeated = config;
  repeated["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = {2, 2, 5};
  EXPECT_NE(refusal(repeated).find("three different layers"), std::string::npos);
  json no_aux = config;
  no_aux["eagle_config"]["use_aux_hidden_state"] = false;
  EXPECT_NE(refusal(no_aux).find("use_aux_hidden_state"), std::string::npos);
  json big_draft = config;
  big_draft["draft_vocab_size"] = 11;
  EXPECT_NE(refusal(big_draft).find("larger than vocab_size"), std::string::npos);
}

TEST(Eagle3Head, ReadsVllmsDefaultLayersUnlessItNamesItsOwn) {
  Eagle3HeadConfig head;
  EXPECT_EQ(eagle3_target_layers(head, 32), (std::vector<int>{2, 16, 29}));  // Llama-3.1-8B
  EXPECT_EQ(eagle3_target_layers(head, 36), (std::vector<int>{2, 18, 33}));  // gpt-oss-120b
  EXPECT_EQ(eagle3_target_layers(head, 7), (std::vector<int>{2, 3, 4}));
  // (2, 2, 1) for 4 layers is not three layers: refused, as vLLM's fc could not take it.
  EXPECT_THROW(eagle3_target_layers(head, 4), ModelError);
  head.aux_layers = {1, 17, 33};
  EXPECT_EQ(eagle3_target_layers(head, 36), (std::vector<int>{1, 17, 33}));
  try {
    (void)eagle3_target_layers(head, 24);
    FAIL() << "layer 33 of a 24-layer target";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("not three different layers of a target of 24 layers"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace nibble::model

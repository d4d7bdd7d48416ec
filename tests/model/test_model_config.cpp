// config.json parsing: each architecture's fields, rope scaling in both spellings, and refusals.
#include "engine/model/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/model/model_description.h"
#include "engine/model/model_error.h"

namespace nibble::model {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json base(const char* arch) {
  return {{"architectures", {arch}},        {"vocab_size", 1000},       {"hidden_size", 64},
          {"num_hidden_layers", 4},         {"num_attention_heads", 8}, {"num_key_value_heads", 2},
          {"intermediate_size", 128},       {"rms_norm_eps", 1e-5},     {"rope_theta", 500000.0},
          {"max_position_embeddings", 2048}};
}

std::string refusal(const json& j) {
  try {
    parse_model_config(j, "cfg.json");
  } catch (const ModelError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(ModelConfig, LlamaWithLlama3RopeScaling) {
  json j = base("LlamaForCausalLM");
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  j["tie_word_embeddings"] = true;
  auto c = parse_model_config(j, "cfg.json");
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_DOUBLE_EQ(c.rope.theta, 500000.0);
  EXPECT_TRUE(c.rope.llama3);
  EXPECT_DOUBLE_EQ(c.rope.factor, 8.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 8192);
  EXPECT_TRUE(c.tie_word_embeddings);
  const ModelDescription d = describe_model(c);
  EXPECT_FALSE(d.layers[0].attention.qk_norm);
  EXPECT_FALSE(d.layers[0].attention.qkv_bias);
  EXPECT_EQ(d.layers[0].ffn.kind, FfnKind::kMlp);
  EXPECT_EQ(d.layers[0].ffn.mlp.intermediate_size, 128);
  EXPECT_TRUE(d.tied_embeddings);
}

TEST(ModelConfig, TransformersV5RopeParametersAreRead) {
  json j = base("LlamaForCausalLM");
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 1234.0},
                          {"factor", 2.0},           {"low_freq_factor", 1.0},
                          {"high_freq_factor", 2.0}, {"original_max_position_embeddings", 64}};
  auto c = parse_model_config(j, "cfg.json");
  EXPECT_DOUBLE_EQ(c.rope.theta, 1234.0);
  EXPECT_TRUE(c.rope.llama3);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 64);
}

TEST(ModelConfig, QwenFamilies) {
  auto q2 = describe_model(parse_model_config(base("Qwen2ForCausalLM"), "cfg.json"));
  EXPECT_TRUE(q2.layers[3].attention.qkv_bias);
  EXPECT_FALSE(q2.layers[3].attention.qk_norm);
  json j3 = base("Qwen3ForCausalLM");
  j3["head_dim"] = 16;
  auto q3 = parse_model_config(j3, "cfg.json");
  EXPECT_TRUE(describe_model(q3).layers[0].attention.qk_norm);
  EXPECT_FALSE(describe_model(q3).layers[0].attention.qkv_bias);
  EXPECT_EQ(q3.head_dim, 16);
  json moe = base("Qwen3MoeForCausalLM");
  moe["num_experts"] = 8;
  moe["num_experts_per_tok"] = 2;
  moe["moe_intermediate_size"] = 32;
  moe["norm_topk_prob"] = true;
  moe["decoder_sparse_step"] = 2;
  moe["mlp_only_layers"] = {3};
  auto m = parse_model_config(moe, "cfg.json");
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_TRUE(m.norm_topk_prob);
  const ModelDescription d = describe_model(m);
  ASSERT_EQ(d.layers.size(), 4u);
  EXPECT_EQ(d.layers[0].ffn.kind, FfnKind::kMlp);  // (0+1) % 2 != 0
  EXPECT_EQ(d.layers[1].ffn.kind, FfnKind::kMoe);
  EXPECT_EQ(d.layers[1].ffn.moe.experts, 8);
  EXPECT_EQ(d.layers[1].ffn.moe.top_k, 2);
  EXPECT_EQ(d.layers[1].ffn.moe.intermediate_size, 32);
  EXPECT_TRUE(d.layers[1].ffn.moe.norm_topk_prob);
  EXPECT_TRUE(d.layers[1].attention.qk_norm);
  EXPECT_EQ(d.layers[2].ffn.kind, FfnKind::kMlp);
  EXPECT_EQ(d.layers[3].ffn.kind, FfnKind::kMlp);  // listed in mlp_only_layers
}

TEST(ModelConfig, MistralSlidingWindowCapsTheContext) {
  json j = base("MistralForCausalLM");
  j["sliding_window"] = 512;
  EXPECT_EQ(parse_model_config(j, "cfg.json").max_context, 512);
  j["sliding_window"] = nullptr;
  EXPECT_EQ(parse_model_config(j, "cfg.json").max_context, 2048);
}

TEST(ModelConfig, MathChangingFieldsAreRefusedByName) {
  json j = base("GPT2LMHeadModel");
  EXPECT_THAT(refusal(j), HasSubstr("'GPT2LMHeadModel' is not supported"));
  j = base("LlamaForCausalLM");
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 4.0}};
  EXPECT_THAT(refusal(j), AllOf(HasSubstr("cfg.json"), HasSubstr("rope_scaling.rope_type"),
                                HasSubstr("'dynamic'")));
  j = base("Qwen2ForCausalLM");
  j["use_sliding_window"] = true;
  EXPECT_THAT(refusal(j), HasSubstr("use_sliding_window"));
  j = base("LlamaForCausalLM");
  j["hidden_act"] = "gelu";
  EXPECT_THAT(refusal(j), HasSubstr("hidden_act"));
  j = base("LlamaForCausalLM");
  j["attention_bias"] = true;
  EXPECT_THAT(refusal(j), HasSubstr("attention_bias"));
  j = base("LlamaForCausalLM");
  j["num_key_value_heads"] = 3;
  EXPECT_THAT(refusal(j), HasSubstr("num_key_value_heads"));
  j = base("LlamaForCausalLM");
  j.erase("hidden_size");
  EXPECT_THAT(refusal(j), HasSubstr("'hidden_size': required"));
  j = base("Qwen3MoeForCausalLM");
  j["num_experts"] = 4;
  j["num_experts_per_tok"] = 2;
  j["moe_intermediate_size"] = 32;
  j["shared_expert_intermediate_size"] = 64;
  EXPECT_THAT(refusal(j), HasSubstr("shared experts"));
}

json qwen3_moe() {
  json j = base("Qwen3MoeForCausalLM");
  j["num_experts_per_tok"] = 2;
  j["moe_intermediate_size"] = 32;
  return j;
}

// transformers 5 writes Qwen3MoeConfig.num_experts as num_local_experts (its attribute_map).
TEST(ModelConfigAliases, Qwen3MoeNumLocalExpertsIsNumExperts) {
  json j = qwen3_moe();
  j["num_local_experts"] = 6;
  const ModelConfig c = parse_model_config(j, "cfg.json");
  EXPECT_EQ(c.num_experts, 6);
  EXPECT_EQ(describe_model(c).layers[0].ffn.kind, FfnKind::kMoe);
  // The alias is checked like the key it stands for.
  j["num_local_experts"] = 0;
  EXPECT_THAT(refusal(j), AllOf(HasSubstr("num_experts"), HasSubstr("positive integer")));
}

TEST(ModelConfigAliases, BothSpellingsMustAgree) {
  json j = qwen3_moe();
  j["num_experts"] = 6;
  j["num_local_experts"] = 6;
  EXPECT_EQ(parse_model_config(j, "cfg.json").num_experts, 6);
  j["num_local_experts"] = 8;
  EXPECT_THAT(refusal(j), AllOf(HasSubstr("'num_local_experts'"), HasSubstr("'num_experts'"),
                                HasSubstr("differ")));
}

TEST(ModelConfigAliases, OnlyForTheArchitectureThatDeclaresThem) {
  // Qwen3 (dense) declares no alias: a stray num_local_experts changes nothing.
  json j = base("Qwen3ForCausalLM");
  j["num_local_experts"] = 6;
  EXPECT_EQ(parse_model_config(j, "cfg.json").num_experts, 0);
}

// openai/gpt-oss-20b's config.json as published (layer_types shortened to its 24 entries).
json gpt_oss_20b() {
  json layer_types = json::array();
  for (int l = 0; l < 24; ++l)
    layer_types.push_back(l % 2 ? "full_attention" : "sliding_attention");
  json j = json::parse(R"({
    "architectures": ["GptOssForCausalLM"], "attention_bias": true, "attention_dropout": 0.0,
    "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2880, "initial_context_length": 4096, "initializer_range": 0.02,
    "intermediate_size": 2880, "max_position_embeddings": 131072, "model_type": "gpt_oss",
    "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 24,
    "num_key_value_heads": 8, "num_local_experts": 32, "output_router_logits": false,
    "pad_token_id": 199999,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn",
      "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
      "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128,
    "swiglu_limit": 7.0, "tie_word_embeddings": false, "use_cache": true, "vocab_size": 201088
  })");
  j["layer_types"] = layer_types;
  return j;
}

TEST(ModelConfigGptOss, PublicTwentyBConfig) {
  const ModelConfig c = parse_model_config(gpt_oss_20b(), "cfg.json");
  EXPECT_EQ(c.arch, Arch::GptOss);
  EXPECT_EQ(c.num_experts, 32);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.moe_intermediate_size, 2880);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_context, 131072);
  EXPECT_TRUE(c.rope.yarn);
  EXPECT_FALSE(c.rope.truncate);
  EXPECT_EQ(c.rope.factor, 32.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 4096);
  EXPECT_EQ(c.rope.theta, 150000.0);
  EXPECT_NEAR(c.rope.attention_factor, 0.1 * std::log(32.0) + 1.0, 1e-15);

  const ModelDescription d = describe_model(c);
  ASSERT_EQ(d.layers.size(), 24u);
  for (int l = 0; l < 24; ++l) {
    const LayerSpec& s = d.layers[std::size_t(l)];
    EXPECT_EQ(s.attention.sliding_window, l % 2 ? 0 : 128) << l;
    EXPECT_TRUE(s.attention.sinks && s.attention.qkv_bias && s.attention.o_bias);
    ASSERT_EQ(s.ffn.kind, FfnKind::kMoe);
    EXPECT_EQ(s.ffn.moe.routing, MoeRouting::kTopKSoftmax);
    EXPECT_EQ(s.ffn.moe.activation, ExpertActivation::kClampedSwiGlu);
    EXPECT_EQ(s.ffn.moe.layout, ExpertLayout::kFusedInterleaved);
    EXPECT_FLOAT_EQ(s.ffn.moe.swiglu_limit, 7.0f);
    EXPECT_FLOAT_EQ(s.ffn.moe.swiglu_alpha, 1.702f);
    EXPECT_TRUE(s.ffn.moe.router_bias && s.ffn.moe.expert_bias);
  }
}

TEST(ModelConfigGptOss, LayerTypesDefaultToAlternatingAndMustBeKnown) {
  json j = gpt_oss_20b();
  j.erase("layer_types");
  const ModelConfig c = parse_model_config(j, "cfg.json");
  EXPECT_EQ(c.layer_windows[0], 128);
  EXPECT_EQ(c.layer_windows[1], 0);
  j["layer_types"] = json::array({"sliding_attention"});
  EXPECT_THAT(refusal(j), HasSubstr("num_hidden_layers (24)"));
  j = gpt_oss_20b();
  j["layer_types"][3] = "chunked_attention";
  EXPECT_THAT(refusal(j), AllOf(HasSubstr("layer 3"), HasSubstr("chunked_attention")));
  j = gpt_oss_20b();
  j["experts_per_token"] = 2;  // the second spelling of num_experts_per_tok must agree
  EXPECT_THAT(refusal(j), HasSubstr("differ"));
}

TEST(ModelConfigRope, YarnNeedsItsFactorAndTakesExplicitAttentionFactor) {
  json j = gpt_oss_20b();
  j["rope_scaling"].erase("factor");
  EXPECT_THAT(refusal(j), HasSubstr("rope_scaling.factor"));
  j = gpt_oss_20b();
  j["rope_scaling"]["attention_factor"] = 1.25;
  EXPECT_EQ(parse_model_config(j, "cfg.json").rope.attention_factor, 1.25);
  j["rope_scaling"].erase("attention_factor");
  j["rope_scaling"].erase("truncate");
  EXPECT_TRUE(parse_model_config(j, "cfg.json").rope.truncate);  // transformers' default
}

// Qwen/Qwen3-Next-80B-A3B-Instruct's config.json (the keys that matter), as it ships: the layer
// mix by full_attention_interval, partial_rotary_factor at the top level.
json qwen3_next_80b() {
  return {{"architectures", {"Qwen3NextForCausalLM"}},
          {"decoder_sparse_step", 1},
          {"full_attention_interval", 4},
          {"head_dim", 256},
          {"hidden_act", "silu"},
          {"hidden_size", 2048},
          {"intermediate_size", 5120},
          {"linear_conv_kernel_dim", 4},
          {"linear_key_head_dim", 128},
          {"linear_num_key_heads", 16},
          {"linear_num_value_heads", 32},
          {"linear_value_head_dim", 128},
          {"max_position_embeddings", 262144},
          {"mlp_only_layers", json::array()},
          {"model_type", "qwen3_next"},
          {"moe_intermediate_size", 512},
          {"norm_topk_prob", true},
          {"num_attention_heads", 16},
          {"num_experts", 512},
          {"num_experts_per_tok", 10},
          {"num_hidden_layers", 48},
          {"num_key_value_heads", 2},
          {"partial_rotary_factor", 0.25},
          {"rms_norm_eps", 1e-06},
          {"rope_scaling", nullptr},
          {"rope_theta", 10000000},
          {"shared_expert_intermediate_size", 512},
          {"tie_word_embeddings", false},
          {"vocab_size", 151936}};
}

TEST(ModelConfigQwen3Next, PublicEightyBConfig) {
  const ModelConfig c = parse_model_config(qwen3_next_80b(), "cfg.json");
  EXPECT_EQ(c.arch, Arch::Qwen3Next);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.rotary_dim, 64);
  EXPECT_EQ(c.rope.theta, 1e7);
  EXPECT_EQ(c.shared_expert_intermediate_size, 512);
  EXPECT_TRUE(c.norm_topk_prob);
  const ModelDescription d = describe_model(c);
  ASSERT_EQ(d.layers.size(), 48u);
  EXPECT_TRUE(d.has_recurrent_state());
  EXPECT_EQ(d.final_norm, NormKind::kRmsZeroCentred);
  for (int l = 0; l < 48; ++l) {
    const LayerSpec& s = d.layers[std::size_t(l)];
    EXPECT_EQ(s.norm, NormKind::kRmsZeroCentred);
    ASSERT_EQ(s.ffn.kind, FfnKind::kMoe) << l;
    EXPECT_EQ(s.ffn.moe.experts, 512);
    EXPECT_EQ(s.ffn.moe.top_k, 10);
    EXPECT_EQ(s.ffn.moe.routing, MoeRouting::kSoftmaxTopK);
    EXPECT_EQ(s.ffn.moe.shared_expert_intermediate_size, 512);
    if (l % 4 == 3) {  // every fourth layer attends
      EXPECT_EQ(s.mixer, MixerKind::kAttention) << l;
      EXPECT_TRUE(s.attention.output_gate && s.attention.qk_norm);
    } else {
      ASSERT_EQ(s.mixer, MixerKind::kGatedDeltaNet) << l;
      EXPECT_EQ(s.linear_attention.key_heads, 16);
      EXPECT_EQ(s.linear_attention.value_heads, 32);
      EXPECT_EQ(s.linear_attention.key_head_dim, 128);
      EXPECT_EQ(s.linear_attention.value_head_dim, 128);
      EXPECT_EQ(s.linear_attention.conv_kernel, 4);
    }
  }
}

TEST(ModelConfigQwen3Next, LayerTypesRopeParametersAndDefaults) {
  json j = qwen3_next_80b();
  j["num_hidden_layers"] = 3;
  j["layer_types"] = {"full_attention", "linear_attention", "full_attention"};
  j.erase("partial_rotary_factor");  // Qwen3NextConfig's default: 0.25
  j["mlp_only_layers"] = {2};
  j["num_experts"] = 0;  // a dense model
  ModelConfig c = parse_model_config(j, "cfg.json");
  EXPECT_EQ(c.rotary_dim, 64);
  ModelDescription d = describe_model(c);
  EXPECT_EQ(d.layers[0].mixer, MixerKind::kAttention);
  EXPECT_EQ(d.layers[1].mixer, MixerKind::kGatedDeltaNet);
  EXPECT_EQ(d.layers[2].mixer, MixerKind::kAttention);
  for (const LayerSpec& s : d.layers) EXPECT_EQ(s.ffn.kind, FfnKind::kMlp);
  // transformers 5 writes the factor into rope_parameters.
  j = qwen3_next_80b();
  j.erase("partial_rotary_factor");
  j["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.5}};
  EXPECT_EQ(parse_model_config(j, "cfg.json").rotary_dim, 128);
  j = qwen3_next_80b();
  j.erase("full_attention_interval");  // default 4
  j["num_hidden_layers"] = 8;
  d = describe_model(parse_model_config(j, "cfg.json"));
  EXPECT_EQ(d.layers[3].mixer, MixerKind::kAttention);
  EXPECT_EQ(d.layers[6].mixer, MixerKind::kGatedDeltaNet);
  EXPECT_EQ(d.layers[7].mixer, MixerKind::kAttention);
  j["full_attention_interval"] = 2;
  d = describe_model(parse_model_config(j, "cfg.json"));
  EXPECT_EQ(d.layers[0].mixer, MixerKind::kGatedDeltaNet);
  EXPECT_EQ(d.layers[1].mixer, MixerKind::kAttention);
  // Partial rotary dims for other architectures too (transformers' default RoPE reads it).
  j = base("LlamaForCausalLM");
  j["partial_rotary_factor"] = 0.5;
  EXPECT_EQ(parse_model_config(j, "cfg.json").rotary_dim, 4);
}

TEST(ModelConfigQwen3Next, BadConfigsAreRefusedByName) {
  json j = qwen3_next_80b();
  j["layer_types"] = json::array({"linear_attention"});
  EXPECT_THAT(refusal(j), HasSubstr("num_hidden_layers (48)"));
  j["layer_types"] = json::array();
  for (int l = 0; l < 48; ++l) j["layer_types"].push_back(l == 5 ? "mamba" : "full_attention");
  EXPECT_THAT(refusal(j), AllOf(HasSubstr("layer 5"), HasSubstr("mamba")));
  j = qwen3_next_80b();
  j["layer_types"] = "linear_attention";
  EXPECT_THAT(refusal(j), HasSubstr("layer_types"));
  j = qwen3_next_80b();
  j["linear_num_value_heads"] = 24;
  EXPECT_THAT(refusal(j), HasSubstr("linear_num_value_heads"));
  j = qwen3_next_80b();
  j["linear_key_head_dim"] = -1;
  EXPECT_THAT(refusal(j), HasSubstr("linear_key_head_dim"));
  j = qwen3_next_80b();
  j["full_attention_interval"] = 0;
  EXPECT_THAT(refusal(j), HasSubstr("full_attention_interval"));
  j = qwen3_next_80b();
  j["partial_rotary_factor"] = 1.5;
  EXPECT_THAT(refusal(j), HasSubstr("partial_rotary_factor"));
  j["partial_rotary_factor"] = 0.001;  // 0 rotary dimensions
  EXPECT_THAT(refusal(j), HasSubstr("even"));
  j = qwen3_next_80b();
  j["num_experts_per_tok"] = 600;
  EXPECT_THAT(refusal(j), HasSubstr("num_experts_per_tok"));
  j = qwen3_next_80b();
  j["mlp_only_layers"] = {48};
  EXPECT_THAT(refusal(j), HasSubstr("mlp_only_layers"));
  j = qwen3_next_80b();
  j["attention_bias"] = true;
  EXPECT_THAT(refusal(j), HasSubstr("attention_bias"));
  j = qwen3_next_80b();
  j["shared_expert_intermediate_size"] = "big";
  EXPECT_THAT(refusal(j), HasSubstr("shared_expert_intermediate_size"));
}

// Every field of the 80B config replaced by each of a set of wrong or odd values: the parser
// either accepts the config (and it describes) or refuses it with a ModelError, never anything
// else.
TEST(ModelConfigQwen3Next, EveryFieldSetToOddValuesParsesOrIsRefused) {
  const json values[] = {-1,
                         0,
                         1,
                         3,
                         2.5,
                         "x",
                         nullptr,
                         json::array(),
                         json::object(),
                         true,
                         json::array({"full_attention"}),
                         1 << 20};
  int accepted = 0, refused = 0;
  const json config = qwen3_next_80b();  // kept alive: the loop walks its items
  for (const auto& [key, ignored] : config.items()) {
    for (const json& v : values) {
      json j = qwen3_next_80b();
      j[key] = v;
      SCOPED_TRACE(key + " = " + v.dump());
      try {
        const ModelConfig c = parse_model_config(j, "cfg.json");
        ++accepted;
        if (c.num_layers <= 64) {
          EXPECT_EQ(int(describe_model(c).layers.size()), c.num_layers);
        }
      } catch (const ModelError&) {
        ++refused;
      }
    }
    json j = qwen3_next_80b();
    j.erase(key);  // absent: a default or "required, missing"
    try {
      parse_model_config(j, "cfg.json");
    } catch (const ModelError&) {
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace nibble::model

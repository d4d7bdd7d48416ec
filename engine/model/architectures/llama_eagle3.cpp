// LlamaForCausalLMEagle3 / Eagle3LlamaForCausalLM: an EAGLE-3 draft head (the layout vLLM's
// llama_eagle3.py loads). One Llama decoder layer whose attention reads the token's embedding
// (input_layernorm) beside the incoming hidden state (hidden_norm), 2H wide; the incoming state
// is the target's three hidden states through fc, or the head's own last output when it chains.
// Its lm_head predicts over draft_vocab_size ids, which d2t maps to the target's.
#include <algorithm>
#include <string>

#include "engine/model/architectures/architecture.h"

namespace nibble::model::architectures {
namespace {

// eagle_aux_hidden_state_layer_ids at the top level (vLLM's speculators format) or under
// eagle_config (SpecForge, ModelOpt), as vLLM's model runner looks for them.
std::vector<int> read_aux_layers(const ConfigReader& r) {
  const char* key = "eagle_aux_hidden_state_layer_ids";
  std::string field = key;
  const nlohmann::json* ids = r.has(key) ? &r.j[key] : nullptr;
  if (ids == nullptr && r.has("eagle_config") && r.j["eagle_config"].is_object() &&
      r.j["eagle_config"].contains(key) && !r.j["eagle_config"][key].is_null()) {
    ids = &r.j["eagle_config"][key];
    field = std::string("eagle_config.") + key;
  }
  if (ids == nullptr) return {};
  if (!ids->is_array() || ids->size() != 3)
    r.fail(field,
           "expected a list of three layer ids (fc reads three hidden states), got " + ids->dump());
  std::vector<int> layers;
  for (const auto& id : *ids) {
    if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() > (1 << 20))
      r.fail(field, "expected non-negative integers, got " + ids->dump());
    layers.push_back(int(id.get<long long>()));
  }
  std::ranges::sort(layers);
  if (std::ranges::adjacent_find(layers) != layers.end())
    r.fail(field, "expected three different layers, got " + ids->dump());
  return layers;
}

void read(const ConfigReader& r, ModelConfig& c) {
  refuse_attention_bias(r);
  if (c.num_layers != 1)
    r.fail("num_hidden_layers",
           "EAGLE-3 heads of one decoder layer (midlayer.*) are implemented, got " +
               std::to_string(c.num_layers));
  if (r.has("eagle_config") && r.j["eagle_config"].is_object() &&
      !r.j["eagle_config"].value("use_aux_hidden_state", true))
    r.fail("eagle_config.use_aux_hidden_state",
           "a head that reads only the target's last hidden state is not implemented");
  Eagle3HeadConfig e;
  e.draft_vocab_size = r.integer_or("draft_vocab_size", c.vocab_size);
  if (e.draft_vocab_size > c.vocab_size)
    r.fail("draft_vocab_size", "larger than vocab_size (" + std::to_string(c.vocab_size) + ")");
  e.target_hidden_size = r.integer_or("target_hidden_size", c.hidden_size);
  // The head tells the target's hidden states from its own by their width (ModelInput::kEagle3).
  if (e.fc_inputs() == c.hidden_size)
    r.fail("target_hidden_size",
           "three times it equals hidden_size, so the target's hidden "
           "states and the head's own would have one width");
  e.aux_layers = read_aux_layers(r);
  e.norm_before_residual = r.boolean_or("norm_before_residual", false);
  c.eagle3 = e;
}

LayerSpec layer(const ModelConfig& c, int l) {
  LayerSpec s;
  s.attention.reads_embedding = l == 0;
  s.attention.norm_before_residual = l == 0 && c.eagle3 && c.eagle3->norm_before_residual;
  s.ffn = dense_mlp(c);
  return s;
}

}  // namespace

const Architecture kLlamaEagle3{Arch::LlamaEagle3, "LlamaForCausalLMEagle3", {}, read, layer};
const Architecture kEagle3Llama{Arch::LlamaEagle3, "Eagle3LlamaForCausalLM", {}, read, layer};

}  // namespace nibble::model::architectures

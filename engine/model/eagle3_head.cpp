#include "engine/model/eagle3_head.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "engine/model/model_description.h"
#include "engine/model/model_error.h"
#include "engine/model/safetensors.h"

namespace nibble::model {
namespace {

// d2t as the target ids of the draft ids; the checkpoints store int64 offsets (torch.long).
std::vector<int> load_draft_to_target(const Checkpoint& ck, int draft_vocab, int vocab) {
  const TensorView& t = ck.require("d2t");
  if (t.dtype != DType::I64 && t.dtype != DType::I32)
    throw ModelError(t.file + ": tensor d2t: expected I64 (or I32) offsets, got " +
                     std::string(dtype_name(t.dtype)));
  if (t.shape != std::vector<std::int64_t>{draft_vocab})
    throw ModelError(t.file + ": tensor d2t: expected shape [" + std::to_string(draft_vocab) +
                     "] (draft_vocab_size), got " + std::to_string(t.numel()) + " elements");
  std::vector<int> ids(static_cast<std::size_t>(draft_vocab));
  for (int i = 0; i < draft_vocab; ++i) {
    std::int64_t offset = 0;
    if (t.dtype == DType::I64) {
      std::memcpy(&offset, t.bytes.data() + std::size_t(i) * 8, 8);
    } else {
      std::int32_t o32 = 0;
      std::memcpy(&o32, t.bytes.data() + std::size_t(i) * 4, 4);
      offset = o32;
    }
    const std::int64_t id = std::int64_t(i) + offset;
    if (id < 0 || id >= vocab)
      throw ModelError(t.file + ": tensor d2t: draft id " + std::to_string(i) +
                       " maps to target id " + std::to_string(id) +
                       ", outside the target's vocabulary of " + std::to_string(vocab));
    ids[std::size_t(i)] = int(id);
  }
  return ids;
}

}  // namespace

std::vector<int> eagle3_target_layers(const Eagle3HeadConfig& head, int target_layers) {
  const int L = target_layers;
  std::vector<int> layers = head.aux_layers;
  const bool configured = !layers.empty();
  if (!configured) layers = {2, L / 2, L - 3};
  std::ranges::sort(layers);
  const bool distinct = std::ranges::adjacent_find(layers) == layers.end();
  if (!distinct || layers.front() < 0 || layers.back() >= L) {
    std::string list;
    for (int l : layers) list += (list.empty() ? "" : ", ") + std::to_string(l);
    throw ModelError("EAGLE-3 head: it reads the target's layers (" + list + ")" +
                     (configured ? " (eagle_aux_hidden_state_layer_ids)"
                                 : " (vLLM's default 2, L/2, L-3; the head's config names none)") +
                     ", which are not three different layers of a target of " + std::to_string(L) +
                     " layers; a head trained for this target names its layers in "
                     "eagle_aux_hidden_state_layer_ids");
  }
  return layers;
}

ModelWeights load_eagle3_head(const std::filesystem::path& dir, const ModelWeights& target) {
  ModelWeights m;
  m.config = load_model_config(dir);
  const std::string where = dir.string() + ": ";
  if (!m.config.eagle3)
    throw ModelError(where + "not an EAGLE-3 head: config.json's architectures is " +
                     m.config.architecture +
                     " (expected LlamaForCausalLMEagle3 or Eagle3LlamaForCausalLM)");
  const ModelConfig& t = target.config;
  ModelConfig& c = m.config;
  const Eagle3HeadConfig& e = *c.eagle3;
  if (c.vocab_size != t.vocab_size)
    throw ModelError(where + "the head's vocab_size " + std::to_string(c.vocab_size) +
                     " is not its target's " + std::to_string(t.vocab_size) + " (" +
                     t.architecture + "): a head is trained for one target");
  if (e.target_hidden_size != t.hidden_size)
    throw ModelError(where + "the head reads hidden states of width " +
                     std::to_string(e.target_hidden_size) +
                     " (target_hidden_size, else hidden_size) but its target's hidden_size is " +
                     std::to_string(t.hidden_size));
  m.quant = load_quant_config(dir);
  if (m.quant.format != QuantFormat::None)
    throw ModelError(where + "a quantized EAGLE-3 head (" + quant_format_name(m.quant.format) +
                     ") is not implemented; heads ship in BF16");
  c.max_context = std::max(c.max_context, t.max_context);
  c.max_position_embeddings = std::max(c.max_position_embeddings, t.max_position_embeddings);
  auto ck = Checkpoint::open(dir);
  const std::int64_t H = c.hidden_size;
  if (ck.has("embed_tokens.weight")) {
    m.embed = load_floats(ck, "embed_tokens.weight", std::int64_t(c.vocab_size) * H);
  } else {
    if (H != t.hidden_size)
      throw ModelError(where + "the head's hidden_size " + std::to_string(H) +
                       " differs from its target's " + std::to_string(t.hidden_size) +
                       ", so it cannot use the target's embedding, and it has no "
                       "embed_tokens.weight of its own");
    m.embed = target.embed;
  }
  const ModelDescription d = describe_model(c);
  m.layers.push_back(load_layer(ck, m, "midlayer.", d.layers[0], dir));
  m.final_norm = load_floats(ck, "norm.weight", H);
  m.lm_head = load_linear(ck, m.quant.format, "lm_head", e.draft_vocab_size, H);
  m.eagle3.emplace();
  m.eagle3->fc = load_linear(ck, m.quant.format, "fc", H, e.fc_inputs());
  if (ck.has("d2t"))
    m.eagle3->draft_to_target = load_draft_to_target(ck, e.draft_vocab_size, c.vocab_size);
  else if (e.draft_vocab_size != c.vocab_size)
    throw ModelError(where + "missing tensor d2t: draft_vocab_size " +
                     std::to_string(e.draft_vocab_size) + " is smaller than vocab_size " +
                     std::to_string(c.vocab_size) + ", so its ids need d2t's map to the target's");
  spdlog::info("loaded the EAGLE-3 head {} (hidden {}, draft vocabulary {}{}) from {}",
               c.architecture, H, e.draft_vocab_size,
               ck.has("embed_tokens.weight") ? ", its own embedding" : "", dir.string());
  return m;
}

}  // namespace nibble::model

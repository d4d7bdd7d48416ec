#pragma once
// Model shapes nibble-make-model can generate: the real architectures' config.json contents
// (llama-3.1-8b, qwen3-8b, qwen3-30b-a3b, gpt-oss-20b, gpt-oss-120b, qwen3-next-80b-a3b) and
// small ones for tests (tiny, small; qwen3_next: tiny, tiny-interval2).
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace nibble::tools {

struct PresetError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// arch: llama | qwen3 | qwen3_moe | gpt_oss | qwen3_next. Throws PresetError for unknown names or
// mismatches (e.g. --arch qwen3 --preset llama-3.1-8b).
nlohmann::ordered_json make_preset_config(const std::string& arch, const std::string& preset);

// An EAGLE-3 head's config.json (--arch llama_eagle3, the layout vLLM's llama_eagle3.py loads):
// preset llama-3.1-8b is the public Llama-3.1-8B-Instruct head's shape (hidden 4096, 32 heads,
// 8 KV heads, intermediate 14336, draft vocabulary 32,000 of 128,256, 2,048 positions, RoPE theta
// by default); tiny takes the shapes of `target` (a model's config.json, required) with a draft
// vocabulary of half its vocabulary, and names the target layers it reads where vLLM's default
// (2, L/2, L-3) would not be three layers of it. A target given to llama-3.1-8b must match it.
nlohmann::ordered_json make_eagle3_head_config(const std::string& preset,
                                               const nlohmann::ordered_json* target);

// generation_config.json for a preset's config.json.
nlohmann::ordered_json make_generation_config(const nlohmann::ordered_json& config);

}  // namespace nibble::tools

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

// generation_config.json for a preset's config.json.
nlohmann::ordered_json make_generation_config(const nlohmann::ordered_json& config);

}  // namespace nibble::tools

#include "engine/spec/speculative_config.h"

#include <nlohmann/json.hpp>

#include <array>
#include <optional>

#include "engine/spec/ngram_drafter.h"

namespace nibble::spec {
namespace {

constexpr int kDefaultPromptLookup = 5;
constexpr int kMaxPromptLookup = 64;

[[noreturn]] void fail(const std::string& message) {
  throw SpeculativeConfigError("--speculative-config: " + message);
}

std::optional<int> integer(const nlohmann::json& object, const char* key, int lo, int hi) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) fail(std::string(key) + " must be an integer, got " + it->dump());
  const std::int64_t v = it->get<std::int64_t>();
  if (v < lo || v > hi)
    fail(std::string(key) + " must be in " + std::to_string(lo) + ".." + std::to_string(hi) +
         ", got " + std::to_string(v));
  return int(v);
}

}  // namespace

const char* method_name(SpecMethod method) {
  switch (method) {
    case SpecMethod::kNgram:
      return "ngram";
    case SpecMethod::kDraftModel:
      return "draft_model";
    case SpecMethod::kMtp:
      return "mtp";
    case SpecMethod::kEagle3:
      return "eagle3";
  }
  return "?";
}

std::unique_ptr<Drafter> make_drafter(const SpeculativeConfig& config) {
  switch (config.method) {
    case SpecMethod::kNgram:
      return std::make_unique<NgramDrafter>(config.prompt_lookup_min, config.prompt_lookup_max);
    case SpecMethod::kDraftModel:
      fail("draft_model loads its model onto a backend: it is built by serve, not make_drafter");
    case SpecMethod::kMtp:
      fail(
          "mtp runs the model's own MTP module on a backend: it is built by serve, not "
          "make_drafter");
    case SpecMethod::kEagle3:
      fail("eagle3 runs an EAGLE-3 head on a backend: it is built by serve, not make_drafter");
  }
  return nullptr;
}

SpeculativeConfig parse_speculative_config(std::string_view text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    fail(std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail("must be a JSON object, got " + j.dump());
  static constexpr std::array kKeys = {"method", "num_speculative_tokens", "prompt_lookup_min",
                                       "prompt_lookup_max", "model"};
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known)
      fail("unknown key \"" + key +
           "\" (known: method, num_speculative_tokens, prompt_lookup_min, prompt_lookup_max, "
           "model)");
  }
  auto method = j.find("method");
  if (method == j.end() || !method->is_string())
    fail("method must be a string: ngram, draft_model, mtp or eagle3");
  const std::string m = method->get<std::string>();
  if (m == "eagle")
    fail(
        "method \"eagle\" (EAGLE-1 heads) is not built in nibble-engine; ngram, draft_model, "
        "mtp and eagle3 are");
  if (m != "ngram" && m != "draft_model" && m != "mtp" && m != "eagle3")
    fail("unknown method \"" + m + "\" (ngram, draft_model, eagle3, mtp)");

  SpeculativeConfig c;
  const auto k = integer(j, "num_speculative_tokens", 1, kMaxSpeculativeTokens);
  if (!k)
    fail("num_speculative_tokens is required (1.." + std::to_string(kMaxSpeculativeTokens) + ")");
  c.num_speculative_tokens = *k;
  const bool has_model = j.contains("model") && !j["model"].is_null();
  if (m == "mtp") {
    c.method = SpecMethod::kMtp;
    if (has_model) fail("mtp drafts with the served model's own MTP module; it takes no model");
    for (const char* key : {"prompt_lookup_min", "prompt_lookup_max"})
      if (j.contains(key)) fail(std::string(key) + " is ngram's; mtp takes none");
    return c;
  }
  if (m == "draft_model" || m == "eagle3") {
    c.method = m == "eagle3" ? SpecMethod::kEagle3 : SpecMethod::kDraftModel;
    if (!has_model || !j["model"].is_string() || j["model"].get<std::string>().empty())
      fail(m + " needs model: the " + (m == "eagle3" ? "EAGLE-3 head's" : "draft model's") +
           " directory or Hub id, a string");
    c.model = j["model"].get<std::string>();
    for (const char* key : {"prompt_lookup_min", "prompt_lookup_max"})
      if (j.contains(key)) fail(std::string(key) + " is ngram's; " + m + " takes none");
    return c;
  }
  if (has_model) fail("model is for draft-model methods; ngram takes none");
  c.method = SpecMethod::kNgram;
  const auto lo = integer(j, "prompt_lookup_min", 1, kMaxPromptLookup);
  const auto hi = integer(j, "prompt_lookup_max", 1, kMaxPromptLookup);
  c.prompt_lookup_min = lo.value_or(hi.value_or(kDefaultPromptLookup));
  c.prompt_lookup_max = hi.value_or(lo.value_or(kDefaultPromptLookup));
  if (c.prompt_lookup_min > c.prompt_lookup_max)
    fail("prompt_lookup_min (" + std::to_string(c.prompt_lookup_min) +
         ") must not exceed prompt_lookup_max (" + std::to_string(c.prompt_lookup_max) + ")");
  return c;
}

}  // namespace nibble::spec

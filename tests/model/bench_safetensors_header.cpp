// How long a safetensors header of many tensors takes to parse: the engine's way
// (text::parse_json_with_max_depth: a SAX pass for the depth and the top-level keys, then a plain
// parse) against nlohmann's callback parser, which the engine used before and which scans the
// enclosing object at every entry's end. Headers shaped as nibble-make-model writes Qwen3-Next's
// NVFP4 experts (weight, weight_scale, weight_scale_2, input_scale per projection).
//   bench_safetensors_header --benchmark_filter=Header
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include <set>
#include <string>

#include "engine/text/json_depth.h"

namespace {

using nlohmann::json;

std::string header_of(int entries) {
  std::string h = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::int64_t offset = 0;
  for (int i = 0; i < entries; ++i) {
    const std::int64_t bytes = 512 * 1024;
    h += ",\"model.layers.0.mlp.experts." + std::to_string(i / 4) + ".proj_" +
         std::to_string(i % 4) +
         ".weight\":{\"dtype\":\"U8\",\"shape\":[1024,512],\"data_offsets\":[" +
         std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  return h + "}";
}

void HeaderSaxThenPlain(benchmark::State& state) {
  const std::string text = header_of(int(state.range(0)));
  for (auto _ : state) {
    std::set<std::string> seen;
    json h = nibble::text::parse_json_with_max_depth<json>(
        text, 8, [&](const std::string& key) { seen.insert(key); });
    benchmark::DoNotOptimize(h);
  }
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(text.size()));
}

void HeaderCallbackParser(benchmark::State& state) {
  const std::string text = header_of(int(state.range(0)));
  for (auto _ : state) {
    std::set<std::string> seen;
    json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
      if (depth == 1 && event == json::parse_event_t::key) seen.insert(parsed.get<std::string>());
      return true;
    };
    json h = json::parse(text, on_event, false);
    benchmark::DoNotOptimize(h);
  }
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(text.size()));
}

}  // namespace

BENCHMARK(HeaderSaxThenPlain)->Arg(1000)->Arg(8000)->Arg(32000)->Unit(benchmark::kMillisecond);
BENCHMARK(HeaderCallbackParser)->Arg(1000)->Arg(8000)->Arg(32000)->Unit(benchmark::kMillisecond);

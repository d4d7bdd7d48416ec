// nibble-quantize: BF16/F16/F32 checkpoint -> NVFP4 (ModelOpt or compressed-tensors layout),
// or, with --dequantize, an NVFP4 checkpoint back to BF16/F32 (the oracle's input).
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli/flag_reader.h"
#include "engine/model/linear.h"
#include "engine/model/model_error.h"
#include "engine/model/nvfp4_checkpoint.h"
#include "engine/model/quant_config.h"
#include "engine/model/safetensors.h"
#include "engine/model/safetensors_writer.h"
#include "kernels/nvfp4/bf16.h"
#include "kernels/nvfp4/nvfp4_ref.h"

namespace {

using namespace nibble;
using model::DType;
using model::QuantFormat;
using model::WeightJob;

constexpr const char* kUsage = R"(usage: nibble-quantize --input DIR --output DIR [options]

Quantizes a BF16/F16/F32 Hugging Face model to NVFP4: E2M1 values (round to nearest even),
one FP8 E4M3 scale per 16 values, one FP32 global scale per tensor. Embeddings, lm_head, norms
and MoE routers stay BF16. Prints each tensor's quantization error (relative RMS, SNR in dB).

  --format FMT      modelopt | compressed-tensors (default modelopt)
  --exclude PATTERN keep matching modules unquantized (glob, or re:REGEX); repeatable
  --dequantize      instead: NVFP4 model -> dense weights (config without quantization)
  --dtype DTYPE     with --dequantize: bf16 (default) or f32 (exact: no rounding after decode)
  --max-shard-mb N  split safetensors into shards of at most N MB (default 5000)
  --threads N       worker threads (default: all cores)
  --version         print the version
)";

// Modules that stay in high precision unless asked otherwise.
const std::vector<std::string> kDefaultExcluded = {"lm_head", "model.embed_tokens", "*norm*",
                                                   "*.mlp.gate", "*.mlp.shared_expert_gate"};

struct Options {
  std::string input, output, format = "modelopt", dtype = "bf16";
  std::vector<std::string> exclude;
  bool dequantize = false;
  bool version = false;
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  std::size_t max_shard_bytes = std::size_t(5000) << 20;
};

nlohmann::ordered_json read_config(const std::filesystem::path& dir) {
  std::ifstream in(dir / "config.json");
  auto j = nlohmann::ordered_json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw model::ModelError((dir / "config.json").string() + ": missing or not a JSON object");
  return j;
}

void write_json(const std::filesystem::path& path, const nlohmann::ordered_json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) throw model::ModelError(path.string() + ": write failed");
}

void copy_side_files(const std::filesystem::path& in, const std::filesystem::path& out) {
  for (const auto& entry : std::filesystem::directory_iterator(in)) {
    const auto name = entry.path().filename().string();
    if (name.ends_with(".safetensors") || name == "model.safetensors.index.json" ||
        name == "config.json" || name == "hf_quant_config.json" || !entry.is_regular_file())
      continue;
    std::filesystem::copy_file(entry.path(), out / name,
                               std::filesystem::copy_options::overwrite_existing);
  }
}

WeightJob copy_job(const model::TensorView& t) {
  return {{{t.name, t.dtype, t.shape}}, [&t](std::vector<std::span<std::byte>>& out) {
            std::memcpy(out[0].data(), t.bytes.data(), t.bytes.size());
          }};
}

int quantize(const Options& o) {
  const auto format =
      o.format == "modelopt" ? QuantFormat::ModelOpt : QuantFormat::CompressedTensors;
  if (model::load_quant_config(o.input).format != QuantFormat::None)
    throw model::ModelError(o.input + ": already quantized (use --dequantize to go back)");
  auto ck = model::Checkpoint::open(o.input);
  model::QuantConfig excluded;
  excluded.excluded = kDefaultExcluded;
  excluded.excluded.insert(excluded.excluded.end(), o.exclude.begin(), o.exclude.end());

  std::mutex report_mutex;
  double worst_snr = 1e9;
  int quantized = 0;
  std::vector<std::string> kept;
  std::vector<WeightJob> jobs;
  for (const auto& name : ck.names()) {
    const auto& t = ck.require(name);
    const std::string module = name.ends_with(".weight") ? name.substr(0, name.size() - 7) : "";
    const bool is_float = t.dtype == DType::BF16 || t.dtype == DType::F16 || t.dtype == DType::F32;
    if (module.empty() || t.shape.size() != 2 || !is_float || excluded.is_excluded(module) ||
        t.shape[1] % nvfp4::kBlockSize != 0) {
      if (!module.empty() && t.shape.size() == 2) kept.push_back(module);
      jobs.push_back(copy_job(t));
      continue;
    }
    ++quantized;
    const auto rows = t.shape[0], cols = t.shape[1];
    jobs.push_back({model::nvfp4_linear_specs(format, module, rows, cols),
                    [&, module, rows, cols](std::vector<std::span<std::byte>>& out) {
                      auto values = model::load_floats(t, rows * cols);
                      auto q = nvfp4::quantize_matrix(values, rows, cols);
                      double err = 0, ref = 0;
                      for (std::int64_t r = 0; r < rows; ++r)
                        for (std::int64_t c = 0; c < cols; ++c) {
                          const double v = values[std::size_t(r * cols + c)];
                          const double d = nvfp4::dequantize_element(q, r, c) - v;
                          err += d * d;
                          ref += v * v;
                        }
                      const double snr = 10.0 * std::log10(ref / std::max(err, 1e-300));
                      // No activation statistics here: a neutral static input scale (amax 8).
                      model::fill_nvfp4_linear(format, q, nvfp4::global_factor_for_amax(8.0f), out);
                      std::lock_guard lock(report_mutex);
                      worst_snr = std::min(worst_snr, snr);
                      std::printf("%-60s [%lld, %lld] rel_rms_error %.4f snr_db %.2f\n",
                                  module.c_str(), (long long)rows, (long long)cols,
                                  std::sqrt(err / std::max(ref, 1e-300)), snr);
                    }});
  }
  std::vector<std::string> listed = {"lm_head"};
  for (const auto& m : kept)
    if (m != "lm_head") listed.push_back(m);
  std::filesystem::create_directories(o.output);
  model::write_checkpoint(o.output, jobs, o.max_shard_bytes, o.threads);
  auto config = read_config(o.input);
  config["quantization_config"] = model::quantization_config_json(format, listed);
  write_json(std::filesystem::path(o.output) / "config.json", config);
  if (format == QuantFormat::ModelOpt)
    write_json(std::filesystem::path(o.output) / "hf_quant_config.json",
               model::hf_quant_config_json(listed));
  copy_side_files(o.input, o.output);
  spdlog::info("quantized {} tensors to NVFP4 ({}); worst SNR {:.2f} dB", quantized, o.format,
               worst_snr);
  return 0;
}

int dequantize(const Options& o) {
  const auto qc = model::load_quant_config(o.input);
  if (qc.format == QuantFormat::None)
    throw model::ModelError(o.input + ": not an NVFP4 checkpoint (no quantization config)");
  if (qc.format == QuantFormat::Mxfp4)
    throw model::ModelError(o.input +
                            ": an MXFP4 (gpt-oss) checkpoint; --dequantize reads NVFP4 only");
  auto ck = model::Checkpoint::open(o.input);
  const DType out_dtype = o.dtype == "f32" ? DType::F32 : DType::BF16;
  // A module is quantized when its scale tensor exists; its other tensors are consumed.
  const std::string marker =
      qc.format == QuantFormat::ModelOpt ? ".weight_scale_2" : ".weight_global_scale";
  std::vector<std::string> modules;
  std::set<std::string> consumed;
  for (const auto& name : ck.names())
    if (name.ends_with(marker)) modules.push_back(name.substr(0, name.size() - marker.size()));
  for (const auto& m : modules)
    for (const char* suffix : {".weight", ".weight_packed", ".weight_scale", ".weight_scale_2",
                               ".input_scale", ".weight_global_scale", ".input_global_scale"})
      consumed.insert(m + suffix);

  std::vector<WeightJob> jobs;
  for (const auto& name : ck.names())
    if (!consumed.count(name)) jobs.push_back(copy_job(ck.require(name)));
  for (const auto& m : modules) {
    const auto& scales = ck.require(m + ".weight_scale");
    if (scales.shape.size() != 2)
      throw model::ModelError(scales.file + ": tensor '" + scales.name + "' must be 2-D");
    const auto rows = scales.shape[0], cols = scales.shape[1] * nvfp4::kBlockSize;
    jobs.push_back({{{m + ".weight", out_dtype, {rows, cols}}},
                    [&, m, rows, cols](std::vector<std::span<std::byte>>& out) {
                      auto lin = model::load_linear(ck, qc.format, m, rows, cols);
                      auto values = nvfp4::dequantize_matrix(lin.fp4);
                      for (std::size_t i = 0; i < values.size(); ++i) {
                        if (out_dtype == DType::F32) {
                          std::memcpy(out[0].data() + 4 * i, &values[i], 4);
                        } else {
                          auto b = nvfp4::float_to_bf16(values[i]);
                          std::memcpy(out[0].data() + 2 * i, &b, 2);
                        }
                      }
                    }});
  }
  std::filesystem::create_directories(o.output);
  model::write_checkpoint(o.output, jobs, o.max_shard_bytes, o.threads);
  auto config = read_config(o.input);
  config.erase("quantization_config");
  if (out_dtype == DType::F32) config["torch_dtype"] = "float32";
  write_json(std::filesystem::path(o.output) / "config.json", config);
  copy_side_files(o.input, o.output);
  spdlog::info("dequantized {} NVFP4 tensors to {}", modules.size(), o.dtype);
  return 0;
}

bool parse_args(int argc, char** argv, Options& o) {
  const bool ok = cli::parse_flags("nibble-quantize", kUsage, argc, argv, [&](cli::FlagReader& f) {
    if (f.is("--dequantize"))
      o.dequantize = true;
    else if (f.is("--version"))
      o.version = true;
    else if (f.is("--input"))
      o.input = f.value();
    else if (f.is("--output"))
      o.output = f.value();
    else if (f.is("--format"))
      o.format = f.value();
    else if (f.is("--exclude"))
      o.exclude.push_back(f.value());
    else if (f.is("--dtype"))
      o.dtype = f.value();
    else
      return cli::take_model_writer_flag(f, o.threads, o.max_shard_bytes);
    return true;
  });
  if (!ok) return false;
  if (o.version) return true;
  if (o.input.empty() || o.output.empty()) {
    std::fprintf(stderr, "nibble-quantize: --input and --output are required\n\n%s", kUsage);
    return false;
  }
  if (o.format != "modelopt" && o.format != "compressed-tensors") {
    std::fprintf(stderr, "nibble-quantize: --format must be modelopt or compressed-tensors\n");
    return false;
  }
  if (o.dtype != "bf16" && o.dtype != "f32") {
    std::fprintf(stderr, "nibble-quantize: --dtype must be bf16 or f32\n");
    return false;
  }
  if (std::filesystem::absolute(o.input) == std::filesystem::absolute(o.output)) {
    std::fprintf(stderr, "nibble-quantize: --output must differ from --input\n");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    if (!parse_args(argc, argv, o)) return 2;
    if (o.version) {
      std::printf("nibble-quantize %s\n", NIBBLE_VERSION);
      return 0;
    }
    return o.dequantize ? dequantize(o) : quantize(o);
  } catch (const std::exception& e) {
    spdlog::error("nibble-quantize: {}", e.what());
    return 1;
  }
}

#pragma once
// `nibble-engine serve MODEL`: MODEL is a model directory, or a Hugging Face Hub id (org/name,
// hf://org/name[@revision]) looked up in the model cache that `nibble pull` and the controller
// fill (controller/source/model_downloader.h), and downloaded into it when it is not there and
// the Hub answers. When it is neither, the error says to run `nibble pull hf://org/name`.
#include <filesystem>
#include <string>

#include "controller/source/model_downloader.h"

namespace nibble::engine::cli {

struct ModelLookup {
  std::filesystem::path cache_dir;  // the model cache (serve --download-dir)
  source::DownloadOptions hub;      // the Hub's endpoint and token
};

struct LocalModel {
  std::filesystem::path dir;
  std::string hub_id;  // org/name when MODEL named a Hub model (vLLM serves it by that name)
};

// Throws std::runtime_error with a message that says what to do.
LocalModel resolve_model_argument(const std::string& model, const ModelLookup& lookup);

}  // namespace nibble::engine::cli

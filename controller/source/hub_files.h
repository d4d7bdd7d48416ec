// controller/source/hub_files.h: which Hugging Face repo files serving needs, and whether a
// path the server sent is safe to write under the cache (no "..", no absolute paths).
#pragma once

#include <string>

namespace nibble::source {

// True for the files `nibble-engine serve` reads: configs, tokenizer files, chat template,
// quantization config and *.safetensors weights, at the top level of the repo only (nested
// folders such as original/ hold duplicate weights in other formats).
bool is_needed_for_serving(const std::string& rfilename);

// True when rfilename is a relative path made of plain components (no "", ".", "..",
// backslashes or NUL), so that joining it to the cache directory stays inside it.
bool is_safe_relative_path(const std::string& rfilename);

// Percent-encodes everything except RFC 3986 unreserved characters; with keep_slash, '/'
// stays (for file paths), without it '/' is encoded too (for revisions like refs/pr/1).
std::string percent_encode(const std::string& text, bool keep_slash);

}  // namespace nibble::source

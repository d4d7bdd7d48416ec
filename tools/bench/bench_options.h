#pragma once
// nibble-bench's command line, with vllm bench serve's option names where they exist.
#include <cstdint>
#include <string>
#include <vector>

namespace nibble::bench {

struct BenchOptions {
  std::string base_url = "http://127.0.0.1:8000";  // scheme://host:port, no path (server_root)
  std::string model;                               // empty: the first model /v1/models lists
  std::string endpoint = "completions";            // or "chat"
  std::string dataset = "random";                  // or "sharegpt:FILE"
  int input_len = 256;
  int output_len = 128;
  int num_prompts = 100;
  std::vector<int> max_concurrency = {1};
  double request_rate = 0;  // requests/s, Poisson arrivals; 0 means all at once
  std::uint64_t seed = 0;
  std::string json_path;  // write results here too
  std::string api_key;
  bool progress = true;
  // --structured-schema: each run is repeated with this JSON Schema as response_format
  // (EOS not ignored, so answers end where the schema does).
  std::string structured_schema_path;
  std::string response_format;  // JSON text sent as response_format; empty: none
};

// Throws std::invalid_argument with a message naming the flag. Returns false for --help or
// --version (`version` tells which, when given).
bool parse_bench_options(int argc, char** argv, BenchOptions& options, bool* version = nullptr);

// --base-url as OpenAI clients take it ("http://host:8000/v1") or as the server's root
// ("http://host:8000"), with or without a trailing '/': the root, to which the client adds
// /v1/... and /tokenize. Throws std::invalid_argument for any other path, which the server's
// routes would not match.
std::string server_root(const std::string& base_url);
extern const char* const kBenchUsage;

}  // namespace nibble::bench

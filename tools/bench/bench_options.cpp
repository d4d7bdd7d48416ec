#include "tools/bench/bench_options.h"

#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "cli/flag_reader.h"

namespace nibble::bench {

const char* const kBenchUsage = R"(usage: nibble-bench [options]

Benchmarks an OpenAI-compatible server from the client side over SSE, as `vllm bench serve`
does: request and token throughput, TTFT, TPOT, ITL and end-to-end latency (mean, median, p99).

  --base-url URL            server, with or without /v1 (default http://127.0.0.1:8000)
  --model NAME              model name (default: the first one /v1/models lists)
  --endpoint completions|chat
  --dataset random|sharegpt:FILE
  --input-len N             prompt tokens for the random dataset (default 256)
  --output-len N            tokens to generate per request, EOS ignored (default 128)
  --num-prompts N           requests per run (default 100)
  --max-concurrency A,B,..  requests in flight; one run per value (default 1)
  --request-rate R          requests per second, Poisson arrivals (default: all at once)
  --seed S                  dataset and arrival seed (default 0)
  --json FILE               also write every run's results as JSON
  --api-key KEY             sent as 'Authorization: Bearer KEY' (default: $OPENAI_API_KEY)
  --no-progress             no progress bar
  --version                 print the version
  --structured-schema FILE  repeat each run with FILE's JSON Schema as response_format and
                            report decode speed with and without it, the server's mask time
                            per token (mean, p50/p90/p99 of nibble_structured_output_mask_seconds)
                            against a decode step, its schema compile time
                            (nibble_structured_output_compile_seconds) and the first
                            constrained request's TTFT
)";

namespace {

int positive_int(const std::string& flag, const std::string& value) {
  const auto v = cli::parse_integer(value, 1, 100000000);
  if (!v) throw std::invalid_argument(flag + " expects a positive integer, got '" + value + "'");
  return int(*v);
}

}  // namespace

std::string server_root(const std::string& base_url) {
  std::string url = base_url;
  while (url.ends_with("/")) url.pop_back();
  if (url.ends_with("/v1")) url.resize(url.size() - 3);
  const std::size_t scheme = url.find("://");
  const std::size_t path = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (url.empty() || path != std::string::npos) {
    throw std::invalid_argument("--base-url takes http://HOST:PORT or http://HOST:PORT/v1, got '" +
                                base_url + "'");
  }
  return url;
}

bool parse_bench_options(int argc, char** argv, BenchOptions& o, bool* version) {
  if (const char* key = std::getenv("OPENAI_API_KEY")) o.api_key = key;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") return false;
    if (flag == "--version") {
      if (version != nullptr) *version = true;
      return false;
    }
    if (flag == "--no-progress") {
      o.progress = false;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--base-url")
      o.base_url = server_root(value);
    else if (flag == "--model")
      o.model = value;
    else if (flag == "--endpoint") {
      if (value != "completions" && value != "chat")
        throw std::invalid_argument("--endpoint is completions or chat");
      o.endpoint = value;
    } else if (flag == "--dataset") {
      if (value != "random" && !value.starts_with("sharegpt:")) {
        throw std::invalid_argument("--dataset is random or sharegpt:FILE");
      }
      o.dataset = value;
    } else if (flag == "--input-len")
      o.input_len = positive_int(flag, value);
    else if (flag == "--output-len")
      o.output_len = positive_int(flag, value);
    else if (flag == "--num-prompts")
      o.num_prompts = positive_int(flag, value);
    else if (flag == "--max-concurrency") {
      o.max_concurrency.clear();
      std::stringstream in(value);
      std::string item;
      while (std::getline(in, item, ',')) o.max_concurrency.push_back(positive_int(flag, item));
      if (o.max_concurrency.empty()) throw std::invalid_argument("--max-concurrency needs values");
    } else if (flag == "--request-rate") {
      char* end = nullptr;
      o.request_rate = std::strtod(value.c_str(), &end);
      if (value == "inf")
        o.request_rate = 0;
      else if (*end || o.request_rate < 0)
        throw std::invalid_argument("--request-rate expects a number >= 0 or inf");
    } else if (flag == "--seed")
      o.seed = std::uint64_t(std::stoull(value));
    else if (flag == "--json")
      o.json_path = value;
    else if (flag == "--api-key")
      o.api_key = value;
    else if (flag == "--structured-schema")
      o.structured_schema_path = value;
    else
      throw std::invalid_argument("unknown option " + flag + " (see --help)");
  }
  return true;
}

}  // namespace nibble::bench

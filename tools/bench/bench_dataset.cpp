#include "tools/bench/bench_dataset.h"

#include <httplib.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

namespace nibble::bench {
namespace {

using nlohmann::json;

std::string random_words(std::mt19937_64& rng, int words) {
  static const char* const kSyllables[] = {"ka", "lo",  "mi",  "ne",  "ru",  "sa",  "ti",  "vo",
                                           "ze", "bar", "qua", "fen", "dor", "lin", "pex", "gro"};
  std::string text;
  for (int w = 0; w < words; ++w) {
    if (w) text += ' ';
    const int syllables = 1 + int(rng() % 3);
    for (int s = 0; s < syllables; ++s) text += kSyllables[rng() % std::size(kSyllables)];
  }
  return text;
}

httplib::Headers auth_headers(const BenchOptions& o) {
  if (o.api_key.empty()) return {};
  return {{"Authorization", "Bearer " + o.api_key}};
}

struct Tokenized {
  std::vector<int> ids;
  int max_model_len = 0;  // the server's prompt limit, 0 if it did not say
};

// What went wrong with a call, for the warning that prompt lengths are approximate.
std::string describe_failure(const std::string& call, const httplib::Result& res) {
  if (!res) return call + " got no answer: " + httplib::to_string(res.error());
  std::string body = res->body.substr(0, 200);
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
  return call + " answered HTTP " + std::to_string(res->status) + (body.empty() ? "" : ": " + body);
}

std::optional<Tokenized> server_tokenize(httplib::Client& client, const BenchOptions& o,
                                         const std::string& text, std::string& failure) {
  auto res =
      client.Post("/tokenize", auth_headers(o),
                  json{{"model", o.model}, {"prompt", text}, {"add_special_tokens", false}}.dump(),
                  "application/json");
  if (!res || res->status != 200) {
    failure = describe_failure("POST /tokenize", res);
    return std::nullopt;
  }
  json body = json::parse(res->body, nullptr, false);
  if (!body.is_object() || !body.contains("tokens")) {
    failure = "POST /tokenize answered HTTP 200 without 'tokens'";
    return std::nullopt;
  }
  return Tokenized{body["tokens"].get<std::vector<int>>(), body.value("max_model_len", 0)};
}

// At least `wanted` token ids of random words after `opening`, tokenized by the server in
// chunks of words that keep each /tokenize call under its prompt limit (a whole prompt of
// input_len * 2 words may exceed it). Words begin with a space, which a BPE pre-tokenizer keeps
// with the word, so the chunks' ids join as the whole text's would. nullopt: no /tokenize.
std::optional<std::vector<int>> tokenize_random_words(httplib::Client& client,
                                                      const BenchOptions& o, std::mt19937_64& rng,
                                                      const std::string& opening, int wanted,
                                                      int& words_per_chunk, std::string& failure) {
  auto first = server_tokenize(client, o, opening, failure);
  if (!first) return std::nullopt;
  std::vector<int> ids = std::move(first->ids);
  // A word is at most 3 syllables of 3 letters and a space: 10 tokens even byte by byte.
  if (first->max_model_len > 0) words_per_chunk = std::max(1, (first->max_model_len - 1) / 10);
  while (int(ids.size()) < wanted) {
    auto chunk = server_tokenize(client, o, " " + random_words(rng, words_per_chunk), failure);
    if (!chunk) return std::nullopt;
    if (chunk->ids.empty()) {
      failure = "POST /tokenize answered no tokens for a chunk of words";
      return std::nullopt;
    }
    ids.insert(ids.end(), chunk->ids.begin(), chunk->ids.end());
  }
  return ids;
}

std::optional<std::string> server_detokenize(httplib::Client& client, const BenchOptions& o,
                                             const std::vector<int>& ids, std::string& failure) {
  auto res = client.Post("/detokenize", auth_headers(o),
                         json{{"model", o.model}, {"tokens", ids}}.dump(), "application/json");
  if (!res || res->status != 200) {
    failure = describe_failure("POST /detokenize", res);
    return std::nullopt;
  }
  json body = json::parse(res->body, nullptr, false);
  if (!body.is_object() || !body.contains("prompt")) {
    failure = "POST /detokenize answered HTTP 200 without 'prompt'";
    return std::nullopt;
  }
  return body["prompt"].get<std::string>();
}

Dataset random_dataset(const BenchOptions& o) {
  std::mt19937_64 rng(o.seed);
  httplib::Client client(o.base_url);
  client.set_connection_timeout(5, 0);
  Dataset d;
  d.exact_lengths = true;
  int words_per_chunk = 16;  // until the server's first answer tells its prompt limit
  for (int i = 0; i < o.num_prompts; ++i) {
    BenchPrompt p;
    // A distinct opening per prompt, so the prefix cache cannot serve one prompt from another.
    const std::string opening = "request " + std::to_string(i) + ":";
    if (d.exact_lengths) {
      auto ids = tokenize_random_words(client, o, rng, opening, o.input_len, words_per_chunk,
                                       d.tokenize_failure);
      if (ids) ids->resize(std::size_t(o.input_len));
      if (ids && o.endpoint == "completions") {
        p.ids = *ids;
      } else if (ids) {
        auto text = server_detokenize(client, o, *ids, d.tokenize_failure);
        if (text) p.text = *text;
        if (!text) ids.reset();
      }
      if (ids) p.expected_input_tokens = o.input_len;
      // No /tokenize (or /detokenize): fall back to about one token per word.
      if (!ids) d.exact_lengths = false;
    }
    if (!d.exact_lengths) p.text = opening + " " + random_words(rng, o.input_len);
    d.prompts.push_back(std::move(p));
  }
  return d;
}

Dataset sharegpt_dataset(const BenchOptions& o, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the ShareGPT file " + path);
  json data = json::parse(in, nullptr, false);
  if (!data.is_array()) throw std::runtime_error(path + " is not a ShareGPT JSON array");
  std::vector<std::string> prompts;
  for (const json& item : data) {
    if (!item.is_object() || !item.contains("conversations")) continue;
    for (const json& turn : item["conversations"]) {
      if (turn.is_object() && turn.value("from", "") == "human" && turn.contains("value") &&
          turn["value"].is_string() && !turn["value"].get<std::string>().empty()) {
        prompts.push_back(turn["value"].get<std::string>());
        break;
      }
    }
  }
  if (prompts.empty()) throw std::runtime_error(path + " holds no human turns");
  std::mt19937_64 rng(o.seed);
  std::shuffle(prompts.begin(), prompts.end(), rng);
  Dataset d;
  for (int i = 0; i < o.num_prompts; ++i)
    d.prompts.push_back({prompts[std::size_t(i) % prompts.size()], {}, 0});
  return d;
}

}  // namespace

Dataset make_dataset(const BenchOptions& o) {
  if (o.dataset == "random") return random_dataset(o);
  return sharegpt_dataset(o, o.dataset.substr(std::string("sharegpt:").size()));
}

}  // namespace nibble::bench

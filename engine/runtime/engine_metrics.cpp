#include "engine/runtime/engine_metrics.h"

#include <vector>

namespace nibble::runtime {
namespace {

// 1, 2, 5, 10, 20, 50, ... up to limit (token-count histograms, as vLLM buckets them).
std::vector<double> one_two_five_buckets(double limit) {
  std::vector<double> bounds;
  for (double decade = 1;; decade *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (m * decade > limit) return bounds;
      bounds.push_back(m * decade);
    }
  }
}

const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kInterTokenBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                                0.3,  0.4,   0.5,  0.75,  1.0, 2.5,  5.0,
                                                7.5,  10.0,  20.0, 40.0,  80.0};
const std::vector<double> kRequestTimeBuckets = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                                 5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                                 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

const std::vector<double> kMaskBuckets = {1e-6,   5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4,
                                          2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
                                          2.5e-2, 5e-2, 0.1,  0.25,   0.5,  1.0};

}  // namespace

EngineMetrics::EngineMetrics(metrics::Registry& r, const std::string& model_name, int max_model_len)
    : requests_running(r.gauge("nibble_requests_running",
                               "Requests whose sequences are in the running batch.", {"model_name"})
                           .labels({model_name})),
      requests_waiting(
          r.gauge("nibble_requests_waiting",
                  "Requests queued, waiting to be scheduled (including preempted ones).",
                  {"model_name"})
              .labels({model_name})),
      kv_cache_usage_ratio(r.gauge("nibble_kv_cache_usage_ratio",
                                   "Fraction of KV cache blocks held by running sequences, 0 to 1.",
                                   {"model_name"})
                               .labels({model_name})),
      prefix_cache_queries(r.counter("nibble_prefix_cache_queries_total",
                                     "Prompt tokens looked up in the prefix cache.", {"model_name"})
                               .labels({model_name})),
      prefix_cache_hits(r.counter("nibble_prefix_cache_hits_total",
                                  "Prompt tokens found in the prefix cache.", {"model_name"})
                            .labels({model_name})),
      preemptions(r.counter("nibble_preemptions_total",
                            "Sequences preempted because the KV cache was full (recomputed later).",
                            {"model_name"})
                      .labels({model_name})),
      prompt_tokens(r.counter("nibble_prompt_tokens_total",
                              "Prompt tokens processed (cached ones included).", {"model_name"})
                        .labels({model_name})),
      generation_tokens(
          r.counter("nibble_generation_tokens_total", "Tokens generated.", {"model_name"})
              .labels({model_name})),
      requests_by_reason(
          r.counter("nibble_requests_total",
                    "Finished requests by finish reason (stop, length, abort, error).",
                    {"model_name", "finished_reason"})),
      time_to_first_token(r.histogram("nibble_time_to_first_token_seconds",
                                      "Time from arrival to the first generated token.",
                                      kTtftBuckets, {"model_name"})
                              .labels({model_name})),
      inter_token_latency(r.histogram("nibble_inter_token_latency_seconds",
                                      "Time between consecutive generated tokens of a sequence.",
                                      kInterTokenBuckets, {"model_name"})
                              .labels({model_name})),
      e2e_request_latency(r.histogram("nibble_e2e_request_latency_seconds",
                                      "Time from arrival to the last token.", kRequestTimeBuckets,
                                      {"model_name"})
                              .labels({model_name})),
      request_queue_time(r.histogram("nibble_request_queue_time_seconds",
                                     "Time from arrival to first being scheduled.",
                                     kRequestTimeBuckets, {"model_name"})
                             .labels({model_name})),
      request_prefill_time(r.histogram("nibble_request_prefill_time_seconds",
                                       "Time from first being scheduled to the first token.",
                                       kRequestTimeBuckets, {"model_name"})
                               .labels({model_name})),
      request_decode_time(r.histogram("nibble_request_decode_time_seconds",
                                      "Time from the first token to the last.", kRequestTimeBuckets,
                                      {"model_name"})
                              .labels({model_name})),
      request_prompt_tokens(r.histogram("nibble_request_prompt_tokens",
                                        "Prompt length of finished requests, in tokens.",
                                        one_two_five_buckets(max_model_len), {"model_name"})
                                .labels({model_name})),
      request_generation_tokens(r.histogram("nibble_request_generation_tokens",
                                            "Generated tokens of finished requests.",
                                            one_two_five_buckets(max_model_len), {"model_name"})
                                    .labels({model_name})),
      structured_mask_time(
          r.histogram("nibble_structured_output_mask_seconds",
                      "Time to compute one constrained sequence's token mask for one step "
                      "(cache hits included).",
                      kMaskBuckets, {"model_name"})
              .labels({model_name})),
      model_name_(model_name) {}

void EngineMetrics::count_finished(const std::string& reason) {
  requests_by_reason.labels({model_name_, reason}).inc();
}

void EngineMetrics::add_state_slots(metrics::Registry& r, int num_slots) {
  r.gauge("nibble_state_slots",
          "Recurrent-state slots of a hybrid model (linear attention), one per --max-num-seqs "
          "sequence.",
          {"model_name"})
      .labels({model_name_})
      .set(num_slots);
  state_slots_used =
      &r.gauge("nibble_state_slots_used",
               "Recurrent-state slots held by running sequences (hybrid models).", {"model_name"})
           .labels({model_name_});
}

}  // namespace nibble::runtime

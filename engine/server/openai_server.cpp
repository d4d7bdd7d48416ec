#include "engine/server/openai_server.h"

#include <spdlog/spdlog.h>

#include <ctime>
#include <map>

#include "engine/chat/template_error.h"
#include "engine/server/api_error.h"
#include "engine/server/bounded_json.h"
#include "engine/server/chat_messages.h"
#include "engine/server/generation_session.h"
#include "engine/server/request_id.h"
#include "engine/server/structured_output_request.h"
#include "engine/server/tool_call_metrics.h"
#include "engine/structured/structured_error.h"
#include "http/client_connection.h"
#include "http/metrics_endpoint.h"

namespace nibble::server {
// A validated request of either endpoint, tokenized and ready for the engine.
struct PreparedRequest {
  Endpoint endpoint;
  std::string id;
  std::string model;
  std::vector<int> prompt;
  std::string echo_text;  // completions with echo: the prompt, as text
  runtime::SamplingParams params;
  bool max_tokens_given = false;
  bool stream = false;
  bool include_usage = false;
  std::shared_ptr<const ChatOutputPlan> chat_output;  // chat: how its text is parsed
  std::shared_ptr<const structured::TokenConstraintFactory> constraint;
};

namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// How often a non-streamed request checks that its client is still connected.
constexpr auto kDisconnectPoll = 100ms;

using http::send_error;
using http::send_json;

http::ServerConfig http_config(const ServerConfig& c) {
  http::ServerConfig h;
  h.name = "engine";
  h.host = c.host;
  h.port = c.port;
  h.threads = c.http_threads;
  h.read_timeout = c.read_timeout;
  h.max_pending_connections_per_client = c.max_pending_connections_per_client;
  h.max_body_bytes = c.max_body_bytes;
  h.api_keys = c.api_keys;
  h.allowed_origins = c.allowed_origins;
  h.open_paths = {"/health", "/version"};
  if (!c.metrics_require_key) h.open_paths.push_back("/metrics");
  return h;
}

// The prompt limit, of generation requests and of /tokenize and /detokenize alike (a prompt the
// engine would refuse is not worth tokenizing; nibble-bench tokenizes in chunks under it).
void check_prompt_length(std::size_t tokens, int limit, const std::string& param) {
  if (tokens >= std::size_t(limit)) {
    throw invalid_request("This model's maximum context length is " + std::to_string(limit) +
                              " tokens. However, your prompt has " + std::to_string(tokens) +
                              " tokens. Please reduce the length of the prompt.",
                          param);
  }
}

// Bounds the tokenizer's work by the prompt's size before it runs: a prompt that fits `limit`
// tokens has at most limit * bytes_per_token bytes (a 30 MB prompt took ~3 s to tokenize, only
// to be refused by its token count).
void check_prompt_bytes(std::size_t bytes, const RequestLimits& limits, int limit,
                        const std::string& param) {
  const std::size_t most = std::size_t(limit) * std::size_t(limits.max_prompt_bytes_per_token);
  if (bytes > most) {
    throw invalid_request(
        "This model's maximum context length is " + std::to_string(limit) +
            " tokens. However, your prompt has " + std::to_string(bytes) + " bytes, more than " +
            std::to_string(limits.max_prompt_bytes_per_token) + " bytes per token of context (" +
            std::to_string(most) + " bytes). Please reduce the length of the prompt.",
        param);
  }
}

json parse_body(const httplib::Request& req, const RequestLimits& limits) {
  return parse_client_json<json>(req.body, limits.max_json_depth, "the request body");
}

// The prompt the chat template makes of `chat`. A template's failure reaches the client only as
// the message of its raise_exception() (written for users: "roles must alternate ..."); other
// errors (an undefined attribute, a type error) would describe the template's insides, so they
// are logged at debug and the client gets a plain refusal.
std::string render_chat_prompt(const chat::ChatTemplate& chat_template,
                               const chat::ChatRequest& chat) {
  try {
    return chat_template.render(chat);
  } catch (const chat::TemplateRaised& e) {
    throw invalid_request(std::string("the chat template rejected the messages: ") + e.message(),
                          "messages");
  } catch (const std::exception& e) {
    spdlog::debug("chat template failed on a request: {}", e.what());
    throw invalid_request(
        "the chat template could not render these messages (check their roles, content and "
        "tool calls)",
        "messages");
  }
}

// Harmony's <|return|> (the answer is done) and <|call|> (a tool call waits for its result) end
// the turn whatever the checkpoint's generation_config lists as EOS.
void add_harmony_stop_tokens(const tokenizer::Tokenizer& tokenizer, std::vector<int>& stop_ids) {
  for (const char* marker : {"<|return|>", "<|call|>"}) {
    const std::vector<int> ids = tokenizer.encode(marker, {.add_special_tokens = false});
    if (ids.size() == 1 && tokenizer.is_special(ids[0])) stop_ids.push_back(ids[0]);
  }
}

// Completions report logprobs column-wise; chat reports a list of entries.
json completion_logprobs(const json& entries) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const json& e : entries) {
    tokens.push_back(e["token"]);
    token_logprobs.push_back(e["logprob"]);
    top.push_back(e["top"]);
    offsets.push_back(e["offset"]);
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

json format_logprobs(Endpoint endpoint, const json& entries) {
  if (entries.is_null()) return nullptr;
  return endpoint == Endpoint::kChat ? json{{"content", entries}} : completion_logprobs(entries);
}

// Everything the streaming callback needs, kept alive by the callback itself.
struct StreamState {
  PreparedRequest request;
  std::int64_t created = 0;
  std::shared_ptr<GenerationSession> session;  // shared with the access log's facts
  std::vector<ChatChoiceOutput> chat_outputs;  // chat: one per choice
  bool started = false;
  bool finished = false;
  http::ResponsesInFlight::Token in_flight;  // released with the state, once httplib is done
};

json chunk_envelope(const PreparedRequest& r, std::int64_t created) {
  return {{"id", r.id},
          {"object", r.endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", r.model},
          {"choices", json::array()}};
}

bool write_event(httplib::DataSink& sink, const json& payload) {
  const std::string line =
      "data: " + payload.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
  return sink.write(line.data(), line.size());
}

}  // namespace

OpenAiServer::OpenAiServer(ServerConfig config, runtime::EngineLoop& engine,
                           const tokenizer::Tokenizer& tokenizer,
                           const chat::ChatTemplate* chat_template, metrics::Registry& registry)
    : config_(std::move(config)),
      engine_(engine),
      tokenizer_(tokenizer),
      chat_template_(chat_template),
      registry_(registry),
      http_(http_config(config_)),
      access_log_(config_.access_log),
      created_(std::time(nullptr)),
      tool_metrics_(std::make_shared<ToolCallMetrics>(registry, config_.served_model_name)),
      structured_requests_(registry.counter("nibble_structured_output_requests_total",
                                            "Requests with a structured output, by kind "
                                            "(json_schema, json_object, regex, choice, tool_call).",
                                            {"model_name", "kind"})),
      grammar_compile_time_(
          registry
              .histogram("nibble_structured_output_compile_seconds",
                         "Time to compile a structured output's grammar (cache misses only).",
                         {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
                         {"model_name"})
              .labels({config_.served_model_name})) {
  config_.structured.json.max_depth = config_.limits.max_json_depth;
  route();
  access_log_.install(http_.routes());
}

structured::GrammarCache& OpenAiServer::grammar_cache() {
  std::call_once(grammar_cache_once_, [this] {
    const auto start = std::chrono::steady_clock::now();
    // A harmony grammar writes message headers with the model's own marker tokens, and the
    // turn may end with <|return|> or <|call|> (stop tokens of every harmony request).
    std::vector<int> eos_ids = engine_.config().eos_token_ids;
    std::vector<std::string> markers;
    if (config_.chat_output.harmony) {
      add_harmony_stop_tokens(tokenizer_, eos_ids);
      markers = {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>"};
    }
    auto vocabulary = structured::TokenVocabulary::from_tokenizer(
        tokenizer_, std::size_t(engine_.vocab_size()), std::move(eos_ids), markers);
    grammar_cache_ =
        std::make_unique<structured::GrammarCache>(std::move(vocabulary), config_.structured);
    spdlog::info("structured outputs: vocabulary of {} tokens prepared in {:.0f} ms",
                 engine_.vocab_size(),
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  });
  return *grammar_cache_;
}

void OpenAiServer::prepare_structured_outputs_in_background() {
  if (structured_warmup_.joinable()) return;
  structured_warmup_ = std::jthread([this] {
    try {
      grammar_cache();
    } catch (const std::exception& e) {  // a request retries and reports it
      spdlog::warn("structured outputs: preparing the vocabulary failed: {}", e.what());
    }
  });
}

std::shared_ptr<const structured::TokenConstraintFactory> OpenAiServer::output_constraint(
    const httplib::Request& req, const json& body, bool chat) {
  if (!has_structured_output_fields(body)) return nullptr;
  structured::GrammarCache& cache = grammar_cache();
  // Parsed again with key order kept: objects follow their schema's property order.
  const auto ordered = parse_client_json<nlohmann::ordered_json>(
      req.body, config_.limits.max_json_depth, "the request body");
  auto request = parse_structured_output(ordered, chat, config_.limits.max_json_depth);
  if (!request) return nullptr;
  // gpt-oss: the constraint is the body of the final (or tool-call) message, after its header.
  request->spec.harmony = chat && config_.chat_output.harmony;
  structured::GrammarCache::Result compiled;
  try {
    compiled = cache.get(request->spec);
  } catch (const structured::StructuredError& e) {
    throw invalid_request(e.what(), request->param);
  }
  if (!compiled.cached) grammar_compile_time_.observe(compiled.compile_seconds);
  structured_requests_.labels({config_.served_model_name, compiled.grammar->kind()}).inc();
  return compiled.grammar;
}

int OpenAiServer::bind() {
  return http_.bind();
}

void OpenAiServer::listen() {
  http_.listen();
}

void OpenAiServer::route() {
  httplib::Server& routes = http_.routes();
  routes.Get("/health", [this](const httplib::Request& req, httplib::Response& res) {
    access_log_.begin(req);
    const bool healthy = ready_ && engine_.accepting();
    res.status = healthy ? 200 : 503;
    res.set_content(healthy ? "ok" : (ready_ ? "draining" : "loading"), "text/plain");
  });
  http::serve_metrics(routes, registry_);
  routes.Get("/version", [this](const httplib::Request& req, httplib::Response& res) {
    access_log_.begin(req);
    send_json(res, 200, {{"version", NIBBLE_VERSION}});
  });
  routes.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    access_log_.begin(req);
    json model = {{"id", config_.served_model_name},
                  {"object", "model"},
                  {"created", created_},
                  {"owned_by", "nibble"},
                  {"root", config_.served_model_name},
                  {"max_model_len", engine_.max_tokens_per_sequence()}};
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}});
  });
  routes.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completions(req, res, *access_log_.begin(req));
  });
  routes.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    chat_completions(req, res, *access_log_.begin(req));
  });
  routes.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    access_log_.begin(req);
    try {
      const json body = parse_body(req, config_.limits);
      const int limit = engine_.max_tokens_per_sequence();
      std::vector<int> ids;
      if (body.contains("messages")) {
        if (!chat_template_) throw invalid_request("this model has no chat template");
        chat::ChatRequest chat;
        if (!body["messages"].is_array())
          throw invalid_request("'messages' must be an array", "messages");
        chat.messages = adapt_roles_to_template(normalize_chat_messages(body["messages"]),
                                                chat_template_->source());
        const json* generation_prompt =
            body.contains("add_generation_prompt") ? &body["add_generation_prompt"] : nullptr;
        if (generation_prompt && !generation_prompt->is_boolean())
          throw invalid_request("'add_generation_prompt' must be a boolean",
                                "add_generation_prompt");
        chat.add_generation_prompt = !generation_prompt || generation_prompt->get<bool>();
        const std::string prompt = render_chat_prompt(*chat_template_, chat);
        check_prompt_bytes(prompt.size(), config_.limits, limit, "messages");
        ids = tokenizer_.encode(prompt);
        check_prompt_length(ids.size(), limit, "messages");
      } else if (body.contains("prompt") && body["prompt"].is_string()) {
        const std::string& prompt = body["prompt"].get_ref<const std::string&>();
        const json* special =
            body.contains("add_special_tokens") ? &body["add_special_tokens"] : nullptr;
        if (special && !special->is_boolean())
          throw invalid_request("'add_special_tokens' must be a boolean", "add_special_tokens");
        check_prompt_bytes(prompt.size(), config_.limits, limit, "prompt");
        ids = tokenizer_.encode(prompt, {.add_special_tokens = !special || special->get<bool>()});
        check_prompt_length(ids.size(), limit, "prompt");
      } else {
        throw invalid_request("send 'prompt' (a string) or 'messages'", "prompt");
      }
      send_json(res, 200, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", limit}});
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {  // not ours to show: a library's words about its insides
      spdlog::debug("/tokenize failed: {}", e.what());
      send_error(res, invalid_request("the request could not be tokenized"));
    }
  });
  routes.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    access_log_.begin(req);
    try {
      const json body = parse_body(req, config_.limits);
      if (!body.contains("tokens") || !body["tokens"].is_array()) {
        throw invalid_request("'tokens' must be an array of token ids", "tokens");
      }
      check_prompt_length(body["tokens"].size(), engine_.max_tokens_per_sequence(), "tokens");
      std::vector<int> ids;
      for (const json& t : body["tokens"]) {
        if (!t.is_number_integer())
          throw invalid_request("'tokens' must be an array of token ids", "tokens");
        ids.push_back(t.get<int>());
      }
      send_json(res, 200, {{"prompt", tokenizer_.decode(ids)}});
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      send_error(res, invalid_request(e.what(), "tokens"));
    }
  });
}

namespace {

// One call of the SSE content provider: the opening chunks, then whatever the engine produced.
bool write_stream_events(StreamState& state, httplib::DataSink& sink) {
  const PreparedRequest& r = state.request;
  GenerationSession& session = *state.session;
  if (!state.started) {  // chat: the role first; completions with echo: the prompt
    state.started = true;
    const int n = std::max(1, r.params.n);
    for (int i = 0; i < n; ++i) {
      json chunk = chunk_envelope(r, state.created);
      if (r.endpoint == Endpoint::kChat) {
        chunk["choices"].push_back({{"index", i},
                                    {"delta", {{"role", "assistant"}, {"content", ""}}},
                                    {"logprobs", nullptr},
                                    {"finish_reason", nullptr}});
      } else if (!r.echo_text.empty()) {
        chunk["choices"].push_back({{"index", i},
                                    {"text", r.echo_text},
                                    {"logprobs", nullptr},
                                    {"finish_reason", nullptr}});
      } else {
        continue;
      }
      if (!write_event(sink, chunk)) return false;
    }
  }
  for (ChoiceDelta& d : session.poll(100ms)) {
    if (d.text.empty() && !d.finish_reason && !d.logprobs.is_array()) continue;
    if (r.endpoint == Endpoint::kChat) {
      for (json& choice :
           chat_stream_choices(state.chat_outputs[std::size_t(d.index)], d.index, d.text,
                               d.finish_reason, format_logprobs(r.endpoint, d.logprobs))) {
        json chunk = chunk_envelope(r, state.created);
        chunk["choices"].push_back(std::move(choice));
        if (!write_event(sink, chunk)) return false;  // the client went away
      }
      continue;
    }
    json chunk = chunk_envelope(r, state.created);
    json choice = {{"index", d.index},
                   {"logprobs", format_logprobs(r.endpoint, d.logprobs)},
                   {"finish_reason", d.finish_reason ? json(*d.finish_reason) : json(nullptr)}};
    if (r.endpoint == Endpoint::kChat) {
      choice["delta"] = d.text.empty() ? json::object() : json{{"content", d.text}};
    } else {
      choice["text"] = d.text;
    }
    chunk["choices"].push_back(choice);
    if (!write_event(sink, chunk)) return false;  // the client went away
  }
  if (session.done()) {
    if (session.error()) {
      write_event(sink, error_body(500, "internal_server_error", *session.error()));
    }
    if (r.include_usage) {
      json chunk = chunk_envelope(r, state.created);
      chunk["usage"] = session.usage();
      write_event(sink, chunk);
    }
    static const std::string done = "data: [DONE]\n\n";
    sink.write(done.data(), done.size());
    state.finished = true;
    sink.done();
  }
  return true;
}

// Checks lengths, submits to the engine and answers: a JSON body, or an SSE stream.
void run_generation(PreparedRequest request, runtime::EngineLoop& engine,
                    const tokenizer::Tokenizer& tokenizer, httplib::Response& res,
                    http::ResponsesInFlight& streams, RequestFacts& facts) {
  const int limit = engine.max_tokens_per_sequence();
  const int prompt_len = int(request.prompt.size());
  facts.prompt_tokens = prompt_len;
  if (prompt_len == 0) throw invalid_request("the prompt is empty", "prompt");
  check_prompt_length(request.prompt.size(), limit,
                      request.endpoint == Endpoint::kChat ? "messages" : "prompt");
  runtime::SamplingParams& params = request.params;
  if (!request.max_tokens_given && request.endpoint == Endpoint::kChat) {
    params.max_tokens = limit - prompt_len;
  } else if (std::int64_t(prompt_len) + params.max_tokens > limit) {
    if (request.max_tokens_given) {
      throw invalid_request("This model's maximum context length is " + std::to_string(limit) +
                                " tokens. However, you requested " +
                                std::to_string(std::int64_t(prompt_len) + params.max_tokens) +
                                " tokens (" + std::to_string(prompt_len) + " in the prompt, " +
                                std::to_string(params.max_tokens) +
                                " in the completion). Please reduce the length of the prompt or "
                                "completion.",
                            "max_tokens");
    }
    params.max_tokens = limit - prompt_len;  // the completions default of 16 did not fit
  }

  auto channel = std::make_shared<runtime::OutputChannel>();
  runtime::GenerationRequest submission{request.id, request.prompt,    params, channel,
                                        {},         request.constraint};
  const runtime::SubmitResult submitted = engine.submit(std::move(submission));
  switch (submitted.status) {
    case runtime::SubmitStatus::kAccepted:
      break;
    case runtime::SubmitStatus::kQueueFull:
    case runtime::SubmitStatus::kNotAccepting:
      throw service_unavailable(submitted.message);
    case runtime::SubmitStatus::kInvalid:
      throw invalid_request(submitted.message, "prompt");
  }
  auto session = std::make_shared<GenerationSession>(
      tokenizer, request.endpoint, params, prompt_len, channel,
      !request.chat_output || request.chat_output->skip_special_tokens);
  facts.session = session;
  const std::int64_t created = std::time(nullptr);
  std::vector<ChatChoiceOutput> chat_outputs;
  for (int i = 0; request.chat_output && i < std::max(1, params.n); ++i) {
    chat_outputs.emplace_back(*request.chat_output);
  }

  if (!request.stream) {
    const int n = std::max(1, params.n);
    std::vector<std::string> text(static_cast<std::size_t>(n));
    std::vector<json> entries(std::size_t(n), params.logprobs >= 0 ? json::array() : json(nullptr));
    std::vector<std::string> finish(static_cast<std::size_t>(n));
    while (!session->done()) {
      // Nothing is written until the end, so only the socket tells that the client left:
      // stop generating for it (finish reason abort), as a stream's failed write does.
      if (http::client_disconnected()) {
        session->cancel();
        spdlog::info("request {}: the client closed the connection; aborted", request.id);
        return;
      }
      for (ChoiceDelta& d : session->poll(kDisconnectPoll)) {
        text[std::size_t(d.index)] += d.text;
        if (d.logprobs.is_array()) {
          for (json& e : d.logprobs) entries[std::size_t(d.index)].push_back(std::move(e));
        }
        if (d.finish_reason) finish[std::size_t(d.index)] = *d.finish_reason;
      }
    }
    if (session->error()) {
      send_json(res, 500, error_body(500, "internal_server_error", *session->error()));
      return;
    }
    json choices = json::array();
    for (int i = 0; i < n; ++i) {
      json choice = {{"index", i},
                     {"logprobs", format_logprobs(request.endpoint, entries[std::size_t(i)])},
                     {"finish_reason", finish[std::size_t(i)]}};
      if (request.endpoint == Endpoint::kChat) {
        ChatChoiceOutput& output = chat_outputs[std::size_t(i)];
        output.append(text[std::size_t(i)]);
        choice["message"] = output.message();
        choice["finish_reason"] = output.finish_reason(finish[std::size_t(i)]);
      } else {
        choice["text"] = request.echo_text + text[std::size_t(i)];
      }
      choices.push_back(choice);
    }
    send_json(
        res, 200,
        {{"id", request.id},
         {"object", request.endpoint == Endpoint::kChat ? "chat.completion" : "text_completion"},
         {"created", created},
         {"model", request.model},
         {"choices", choices},
         {"usage", session->usage()}});
    return;
  }

  auto state = std::make_shared<StreamState>();
  state->request = std::move(request);
  state->created = created;
  state->session = std::move(session);
  state->chat_outputs = std::move(chat_outputs);
  state->in_flight = streams.enter();
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [state](std::size_t, httplib::DataSink& sink) {
        // An exception must not escape into httplib's writer thread: it would end the process.
        try {
          return write_stream_events(*state, sink);
        } catch (const std::exception& e) {
          spdlog::error("stream {} failed: {}", state->request.id, e.what());
          write_event(sink, error_body(500, "internal_server_error", e.what()));
          state->session->cancel();
          return false;
        }
      },
      [state](bool success) {
        if (!success || !state->finished) state->session->cancel();
      });
}

}  // namespace

// What both endpoints' requests carry, checked against the served model; the id follows
// OpenAI's prefixes (cmpl-, chatcmpl-).
template <typename Parsed>
PreparedRequest OpenAiServer::prepare(Endpoint endpoint, const Parsed& parsed,
                                      RequestFacts& facts) {
  facts.model = parsed.model.empty() ? config_.served_model_name : parsed.model;
  if (!parsed.model.empty() && parsed.model != config_.served_model_name) {
    throw model_not_found(parsed.model);
  }
  PreparedRequest r;
  r.endpoint = endpoint;
  r.id = new_response_id(endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-");
  r.model = config_.served_model_name;
  facts.id = r.id;
  r.params = parsed.params;
  r.max_tokens_given = parsed.max_tokens_given;
  r.stream = parsed.stream;
  r.include_usage = parsed.include_usage;
  return r;
}

void OpenAiServer::completions(const httplib::Request& req, httplib::Response& res,
                               RequestFacts& facts) {
  try {
    const json body = parse_body(req, config_.limits);
    CompletionRequest parsed = parse_completion_request(body, config_.limits);
    PreparedRequest r = prepare(Endpoint::kCompletions, parsed, facts);
    r.constraint = output_constraint(req, body, false);
    if (parsed.prompt_text) {
      check_prompt_bytes(parsed.prompt_text->size(), config_.limits,
                         engine_.max_tokens_per_sequence(), "prompt");
      r.prompt =
          tokenizer_.encode(*parsed.prompt_text, {.add_special_tokens = parsed.add_special_tokens});
    } else {
      r.prompt = *parsed.prompt_ids;  // the engine checks them against the model's vocabulary
    }
    if (parsed.echo)
      r.echo_text = parsed.prompt_text ? *parsed.prompt_text : tokenizer_.decode(r.prompt);
    run_generation(std::move(r), engine_, tokenizer_, res, streams_, facts);
  } catch (const ApiError& e) {
    send_error(res, e);
  }
}

void OpenAiServer::chat_completions(const httplib::Request& req, httplib::Response& res,
                                    RequestFacts& facts) {
  try {
    const json body = parse_body(req, config_.limits);
    ChatCompletionRequest parsed = parse_chat_request(body, config_.limits);
    PreparedRequest r = prepare(Endpoint::kChat, parsed, facts);
    if (!chat_template_) {
      throw invalid_request("this model has no chat template; use /v1/completions", "messages");
    }
    r.constraint = output_constraint(req, body, true);
    chat::ChatRequest chat;
    chat.messages = adapt_roles_to_template(parsed.messages, chat_template_->source());
    parse_tool_call_arguments(chat.messages, config_.limits.max_json_depth);
    // vLLM renders the tools even for tool_choice "none" unless told not to.
    const bool hide_tools = config_.chat_output.exclude_tools_when_tool_choice_none &&
                            parsed.tool_use.choice == ToolChoice::kNone;
    chat.tools = hide_tools ? nlohmann::json(nullptr) : parsed.tools;
    chat.add_generation_prompt = parsed.add_generation_prompt;
    chat.extra = parsed.template_kwargs;
    const std::string prompt = render_chat_prompt(*chat_template_, chat);
    check_prompt_bytes(prompt.size(), config_.limits, engine_.max_tokens_per_sequence(),
                       "messages");
    // The template already holds the special tokens (as transformers' apply_chat_template).
    r.prompt = tokenizer_.encode(prompt, {.add_special_tokens = false});
    r.chat_output = std::make_shared<const ChatOutputPlan>(
        plan_chat_output(config_.chat_output, parsed.tool_use, prompt, tool_metrics_));
    if (r.chat_output->harmony) add_harmony_stop_tokens(tokenizer_, r.params.stop_token_ids);
    run_generation(std::move(r), engine_, tokenizer_, res, streams_, facts);
  } catch (const ApiError& e) {
    send_error(res, e);
  }
}

}  // namespace nibble::server

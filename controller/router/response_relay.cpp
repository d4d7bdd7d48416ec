#include "controller/router/response_relay.h"

#include <strings.h>

#include <charconv>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace nibble::router {

namespace {

using namespace std::chrono_literals;

// How long one provider call waits for a chunk before handing control back to httplib (which
// checks whether the server is stopping).
constexpr auto kPollInterval = 100ms;

bool same_name(const std::string& a, const char* b) {
  return strcasecmp(a.c_str(), b) == 0;
}

// Framing and connection headers belong to one hop; httplib writes the router's own.
bool is_hop_header(const std::string& name) {
  for (const char* hop : {"Connection", "Keep-Alive", "Transfer-Encoding", "Content-Length",
                          "Content-Type", "Trailer", "Upgrade"}) {
    if (same_name(name, hop)) return true;
  }
  return false;
}

std::optional<std::size_t> content_length(const httplib::Headers& headers) {
  for (const auto& [name, value] : headers) {
    if (!same_name(name, "Content-Length")) continue;
    std::size_t length = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
    if (ec == std::errc() && end == value.data() + value.size()) return length;
  }
  return std::nullopt;
}

std::string content_type(const httplib::Headers& headers) {
  for (const auto& [name, value] : headers) {
    if (!same_name(name, "Content-Type")) continue;
    // httplib compresses chunked bodies for clients that accept gzip unless the type is exactly
    // text/event-stream, and compression would hold events back; SSE is UTF-8 by definition,
    // so a charset parameter carries nothing.
    if (value.starts_with("text/event-stream")) return "text/event-stream";
    return value;
  }
  return "application/octet-stream";
}

// The last event of a stream its replica cut (the engine died): an SSE `error` event whose data
// is the OpenAI error body, so SDKs raise it instead of ending the stream quietly.
constexpr std::string_view kStreamCutEvent =
    "event: error\ndata: {\"error\":{\"message\":\"the replica serving this stream ended it "
    "before its end (it may have crashed)\",\"type\":\"bad_gateway\",\"param\":null,"
    "\"code\":502}}\n\n";

// Moves what the upstream has into the sink. False ends the response as failed: the client
// then sees a connection closed before the body's end, as it would from the engine itself; an
// event stream first gets kStreamCutEvent (unless the client itself left, or the router stops).
// `remaining`: bytes of a Content-Length body still to write (chunked bodies: nullopt).
bool pump(UpstreamCall& call, httplib::DataSink& sink, std::optional<std::size_t> remaining,
          const std::function<void()>& on_received, bool event_stream) {
  const bool chunked = !remaining.has_value();
  std::string chunk;
  switch (call.next_chunk(chunk, kPollInterval)) {
    case UpstreamCall::Next::kChunk:
      if (remaining && chunk.size() >= *remaining) on_received();  // the body's last bytes
      return sink.write(chunk.data(), chunk.size());
    case UpstreamCall::Next::kWaiting:
      return true;
    case UpstreamCall::Next::kEnd:
      if (!chunked) return false;  // fewer bytes than the upstream's Content-Length
      on_received();
      sink.done();
      return true;
    case UpstreamCall::Next::kFailed:
      if (event_stream && !call.cancelled())
        sink.write(kStreamCutEvent.data(), kStreamCutEvent.size());
      return false;
  }
  return false;
}

}  // namespace

void relay_response(std::shared_ptr<UpstreamCall> call, std::shared_ptr<void> keep_alive,
                    std::function<void()> on_received, httplib::Response& res) {
  // Runs at most once, whichever provider call sees the end first.
  auto received = std::make_shared<std::function<void()>>(std::move(on_received));
  auto once = [received] {
    if (*received) std::exchange(*received, nullptr)();
  };
  const httplib::Headers& headers = call->headers();
  res.status = call->status();
  for (const auto& [name, value] : headers) {
    if (!is_hop_header(name)) res.headers.emplace(name, value);
  }
  const std::string type = content_type(headers);
  auto release = [call](bool success) {
    if (!success || !call->finished()) call->cancel();
  };
  const std::optional<std::size_t> length = content_length(headers);
  if (length && *length == 0) {
    res.set_content("", type);
    once();
    release(true);
    return;
  }
  if (length) {
    res.set_content_provider(
        *length, type,
        [call, keep_alive, once, total = *length](std::size_t offset, std::size_t,
                                                  httplib::DataSink& sink) {
          return pump(*call, sink, total - offset, once, false);
        },
        release);
  } else {
    res.set_chunked_content_provider(
        type,
        [call, keep_alive, once, event_stream = type == "text/event-stream"](
            std::size_t, httplib::DataSink& sink) {
          return pump(*call, sink, std::nullopt, once, event_stream);
        },
        release);
  }
}

}  // namespace nibble::router

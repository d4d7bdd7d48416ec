#include "controller/router/upstream_call.h"

#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <thread>

namespace nibble::router {

namespace {

// Headers that describe one hop's connection or framing, not the request: httplib sets its own.
// Accept-Encoding is dropped so that the replica answers uncompressed and the router can pass
// the bytes through as they come (the router's own server compresses for the client if asked).
// (Origin is not a hop header, but the replica must not see it either: see the header comment.)
bool is_hop_header(const std::string& name) {
  static const char* const kHop[] = {"Host",
                                     "Content-Length",
                                     "Connection",
                                     "Keep-Alive",
                                     "Transfer-Encoding",
                                     "TE",
                                     "Trailer",
                                     "Upgrade",
                                     "Proxy-Connection",
                                     "Proxy-Authorization",
                                     "Accept-Encoding",
                                     "Origin",
                                     "REMOTE_ADDR",
                                     "REMOTE_PORT",
                                     "LOCAL_ADDR",
                                     "LOCAL_PORT"};
  for (const char* hop : kHop) {
    if (strcasecmp(hop, name.c_str()) == 0) return true;
  }
  return false;
}

// Whether the peer reset the connection: httplib 0.11 reports a reset and an orderly close alike
// (Error::Read). Its failed recv() leaves ECONNRESET (and shutdown() of the reset socket
// ENOTCONN) in errno; a reset that came after the peer's FIN (our request reaching a socket
// closed unread) shows as the socket's pending error. Loopback and cluster round trips are far
// below the short wait for it.
bool was_reset(int watched, int send_errno) {
  if (send_errno == ECONNRESET || send_errno == ENOTCONN || send_errno == EPIPE) return true;
  if (watched < 0) return false;
  constexpr auto kResetWait = std::chrono::milliseconds(20);
  const auto deadline = std::chrono::steady_clock::now() + kResetWait;
  for (;;) {
    int pending = 0;
    socklen_t len = sizeof pending;
    if (::getsockopt(watched, SOL_SOCKET, SO_ERROR, &pending, &len) == 0 &&
        (pending == ECONNRESET || pending == EPIPE)) {
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

std::shared_ptr<UpstreamCall> UpstreamCall::start(const ReplicaEndpoint& replica,
                                                  const httplib::Request& request,
                                                  std::chrono::seconds read_timeout) {
  std::shared_ptr<UpstreamCall> call(new UpstreamCall());
  httplib::Request up;
  up.method = request.method;
  // The target as the client sent it (path and query, still percent-encoded); request.path is
  // decoded and has no query.
  up.path = request.target.empty() ? request.path : request.target;
  up.body = request.body;
  for (const auto& [name, value] : request.headers) {
    if (!is_hop_header(name)) up.headers.emplace(name, value);
  }
  // The client's credentials are the router's to check (--api-key); the engine gets its own.
  up.headers.erase("Authorization");
  if (!replica.api_key.empty()) up.headers.emplace("Authorization", "Bearer " + replica.api_key);
  std::thread([call, replica, up = std::move(up), read_timeout]() mutable {
    call->run(replica, std::move(up), read_timeout);
  }).detach();
  return call;
}

void UpstreamCall::run(const ReplicaEndpoint& replica, httplib::Request request,
                       std::chrono::seconds read_timeout) {
  httplib::Client client(replica.host, replica.port);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(read_timeout);
  client.set_keep_alive(false);
  client.set_decompress(false);  // bytes pass through untouched
  client.set_url_encode(false);  // the target is already encoded
  {
    std::lock_guard lock(mutex_);
    if (cancelled_) {
      finished_ = true;
      error_ = "cancelled before sending";
      changed_.notify_all();
      return;
    }
    client_ = &client;
  }
  bool draining = false;
  request.response_handler = [this, &draining](const httplib::Response& r) {
    std::lock_guard lock(mutex_);
    if (r.status == 503) {  // a draining or full engine: nothing was sent to the client yet
      draining = true;
      return false;
    }
    status_ = r.status;
    headers_ = r.headers;
    head_ready_ = true;
    changed_.notify_all();
    return !cancelled_;
  };
  request.content_receiver = [this](const char* data, std::size_t size, std::uint64_t,
                                    std::uint64_t) {
    std::unique_lock lock(mutex_);
    // Backpressure: a client that reads slowly makes this read wait, and the engine's writes
    // then wait on TCP, instead of the router queueing the whole answer.
    changed_.wait(lock, [&] { return cancelled_ || queued_bytes_ < kMaxQueuedBytes; });
    if (cancelled_) return false;  // stop reading: send() returns and closes the connection
    chunks_.emplace_back(data, size);
    queued_bytes_ += size;
    changed_.notify_all();
    return true;
  };
  const auto started = std::chrono::steady_clock::now();
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  // A second descriptor of the connection, so that after a failure its socket can still be asked
  // whether the replica reset it (httplib closes its own descriptor before send() returns).
  int watched = -1;
  client.set_socket_options([&watched](socket_t sock) {
    if (watched < 0) watched = ::dup(sock);
  });
  errno = 0;
  const bool ok = client.send(request, response, error);
  const int send_errno = errno;
  const auto elapsed = std::chrono::steady_clock::now() - started;
  // httplib reports a read timeout as a read error; only the elapsed time tells them apart.
  const bool timed_out = !ok && error == httplib::Error::Read &&
                         elapsed >= std::chrono::milliseconds(read_timeout) * 9 / 10;
  std::string message;
  if (!ok) {
    message = draining ? "replica answered 503 (draining or full)"
                       : std::string(httplib::to_string(error));
  }
  // A read that failed after the whole request was written, with an orderly close (FIN) and no
  // reset: the replica had read the request and went away, as a process that crashes serving
  // it does. A reset means it closed with the request unread (a listener stopped with the
  // connection in its backlog or queue): it never served it, so it may go elsewhere.
  const bool read_failed = !ok && !draining && !timed_out && error == httplib::Error::Read;
  const bool died = read_failed && !was_reset(watched, send_errno);
  if (watched >= 0) ::close(watched);
  {
    std::lock_guard lock(mutex_);
    client_ = nullptr;
  }
  finish(ok, std::move(message), timed_out, draining, died);
}

void UpstreamCall::finish(bool ok, std::string error, bool timed_out, bool refused, bool died) {
  std::lock_guard lock(mutex_);
  finished_ = true;
  refused_ = refused;
  died_ = died;
  succeeded_ = ok;
  timed_out_ = timed_out;
  error_ = std::move(error);
  changed_.notify_all();
}

UpstreamCall::Head UpstreamCall::head_state() const {
  if (cancelled_) return Head::kCancelled;
  if (head_ready_) return Head::kReceived;
  if (!finished_) return Head::kWaiting;
  if (timed_out_) return Head::kTimedOut;
  return died_ ? Head::kDied : Head::kRetryable;
}

UpstreamCall::Head UpstreamCall::wait_head() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return head_ready_ || finished_ || cancelled_; });
  return head_state();
}

UpstreamCall::Head UpstreamCall::wait_head(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return head_ready_ || finished_ || cancelled_; });
  return head_state();
}

bool UpstreamCall::cancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

std::string UpstreamCall::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

bool UpstreamCall::refused() const {
  std::lock_guard lock(mutex_);
  return refused_;
}

bool UpstreamCall::finished() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

UpstreamCall::Next UpstreamCall::next_chunk(std::string& out, std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, wait, [&] { return !chunks_.empty() || finished_ || cancelled_; });
  if (cancelled_) return Next::kFailed;
  if (!chunks_.empty()) {
    out = std::move(chunks_.front());
    chunks_.pop_front();
    queued_bytes_ -= out.size();
    changed_.notify_all();  // room in the queue for the upstream thread
    return Next::kChunk;
  }
  if (!finished_) return Next::kWaiting;
  return succeeded_ ? Next::kEnd : Next::kFailed;
}

void UpstreamCall::cancel() {
  std::lock_guard lock(mutex_);
  if (cancelled_) return;
  cancelled_ = true;
  // Unblocks a read waiting on a silent upstream; the engine then sees its client close.
  // httplib's stop() only shuts the socket down while send() is using it, which is safe.
  if (client_ != nullptr) client_->stop();
  changed_.notify_all();
}

}  // namespace nibble::router

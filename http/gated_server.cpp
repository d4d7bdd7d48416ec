#include "http/gated_server.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/client_connection.h"

namespace nibble::http {
namespace {

const char* reason_phrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 414:
      return "URI Too Long";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Error";
  }
}

// httplib's pool, telling the budget how many accepted connections wait for a worker.
class BudgetedPool : public httplib::ThreadPool {
 public:
  BudgetedPool(std::size_t threads, ConnectionBudget& budget)
      : httplib::ThreadPool(threads), budget_(budget) {}
  void enqueue(std::function<void()> fn) override {
    budget_.queued();
    httplib::ThreadPool::enqueue([this, fn = std::move(fn)] {
      budget_.dequeued();
      fn();
    });
  }

 private:
  ConnectionBudget& budget_;
};

}  // namespace

GatedServer::GatedServer(ConnectionPolicy policy)
    : policy_(std::move(policy)),
      budget_(policy_.workers, policy_.max_waiting_per_peer, policy_.grace) {
  const std::size_t workers = std::size_t(std::max(1, policy_.workers));
  new_task_queue = [this, workers] { return new BudgetedPool(workers, budget_); };
}

void GatedServer::refuse(ConnectionStream& stream, int status, const std::string& reason) {
  httplib::Response res;
  const ApiError error(status, "invalid_request_error", reason);
  if (policy_.write_error) {
    policy_.write_error(res, error);
  } else {
    send_error(res, error);
  }
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  for (const auto& [name, value] : res.headers) out += name + ": " + value + "\r\n";
  out += "Content-Length: " + std::to_string(res.body.size()) + "\r\nConnection: close\r\n\r\n";
  out += res.body;
  stream.write_all(out);
}

bool GatedServer::process_and_close_socket(socket_t sock) {
  const std::string peer = peer_address(sock);
  const ConnectionBudget::Id id = budget_.enter(peer);
  {
    ConnectionStream stream(sock, policy_.timeouts, budget_, id);
    ServedConnection connection(sock, stream);
    const int max_requests = std::max(1, policy_.keep_alive_max_requests);
    for (int served = 0; served < max_requests && !budget_.stopping(); ++served) {
      if (served > 0 && !stream.wait_for_request()) break;
      bool started = false;
      const HeadScan head = stream.read_head(policy_.head_limits, started);
      if (head.state == HeadScan::State::kRefused) {
        spdlog::info("{}: refused a request head from {}: {}", policy_.name, peer, head.reason);
        refuse(stream, head.status, head.reason);
        break;
      }
      if (head.state != HeadScan::State::kComplete) {
        // A head that began and then stalled gets an answer; a connection that never sent a
        // byte (or closed) does not.
        if (started && stream.ended() != ConnectionStream::Ended::kClosed) {
          refuse(stream, 408,
                 stream.ended() == ConnectionStream::Ended::kYielded
                     ? "the request head was still incomplete when its worker was needed"
                     : "the request head was not received within the time limit");
        }
        break;
      }
      stream.begin_body();
      connection.begin_request();
      bool closed = false;
      const bool ok = process_request(stream, served + 1 == max_requests, closed, nullptr);
      stream.end_request();
      if (!ok || closed || connection.close_requested() ||
          stream.ended() != ConnectionStream::Ended::kNo) {
        break;
      }
    }
  }
  budget_.leave(id);
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return true;
}

}  // namespace nibble::http

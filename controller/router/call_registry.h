#pragma once
// The upstream calls in progress, so that stopping the router cancels them all: a request
// waiting for a slow replica's status, or streaming its body, then ends at once instead of
// holding httplib's worker (and Router::stop) for up to the read timeout. Thread-safe.
#include <memory>
#include <mutex>
#include <vector>

#include "controller/router/upstream_call.h"

namespace nibble::router {

class CallRegistry {
 public:
  // Tracks the call; after cancel_all(), a newly added call is cancelled at once.
  void add(const std::shared_ptr<UpstreamCall>& call);
  void cancel_all();

 private:
  std::mutex mutex_;
  bool cancelled_ = false;
  std::vector<std::weak_ptr<UpstreamCall>> calls_;
};

}  // namespace nibble::router

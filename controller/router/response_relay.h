#pragma once
// Passes a replica's answer to the client as it arrives: status, headers and body, chunk by
// chunk, never buffered (an SSE event reaches the client when the engine writes it). A body
// with a Content-Length keeps it; otherwise it goes out chunked. When the client goes away, or
// the answer ends, the upstream call is cancelled so the replica sees its connection close.
#include <httplib.h>

#include <functional>
#include <memory>

#include "controller/router/upstream_call.h"

namespace nibble::router {

// Call after call->wait_head() returned kReceived. `keep_alive` (the request's accounting) is
// held until the response is destroyed, i.e. after its last byte. `on_received` runs once, as
// soon as the replica's whole answer is in and before its last bytes go to the client: the
// replica is done with the request then, and a client that sends its next request the moment
// it has this answer must find the replica's in-flight count already lowered.
void relay_response(std::shared_ptr<UpstreamCall> call, std::shared_ptr<void> keep_alive,
                    std::function<void()> on_received, httplib::Response& res);

}  // namespace nibble::router

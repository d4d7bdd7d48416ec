#pragma once
// The engine's errors are the HTTP layer's OpenAI-shaped ApiError (http/api_error.h); these
// names keep the server's code reading as before.
#include "http/api_error.h"

namespace nibble::server {

using http::ApiError;
using http::error_body;
using http::invalid_request;
using http::model_not_found;
using http::service_unavailable;
using http::unauthorized;

}  // namespace nibble::server

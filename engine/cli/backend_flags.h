#pragma once
// The command-line flags of the backends' tuning (engine/backend/backend_options.h), shared by
// `serve` (flags and --config keys) and `generate`. Each flag takes one value (--name VALUE or
// --name=VALUE); booleans take true or false. Defaults are the forms that won their A/B.
#include <span>
#include <string>
#include <string_view>

#include "engine/backend/backend_options.h"

namespace nibble::engine::cli {

struct BackendFlag {
  std::string_view name;  // long name without the dashes
  std::string_view help;  // one line for --help: the values and what the non-default does
  void (*set)(backend::BackendOptions& options, const std::string& flag, const std::string& value);
};

std::span<const BackendFlag> backend_flags();
const BackendFlag* find_backend_flag(std::string_view name);  // nullptr: not one of them
// The flags' --help lines, aligned like the rest of a usage text.
std::string backend_flags_usage();

}  // namespace nibble::engine::cli

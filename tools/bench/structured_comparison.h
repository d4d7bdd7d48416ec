#pragma once
// nibble-bench --structured-schema: the same run without and with a JSON Schema as
// response_format, decode speed side by side, and the server's first-request compile time.
#include <nlohmann/json.hpp>

#include <string>

#include "tools/bench/bench_dataset.h"
#include "tools/bench/bench_options.h"

namespace nibble::bench {

// Reads the schema file into options.response_format's form; throws naming the file.
std::string response_format_for_schema_file(const std::string& path);

// Runs both variants at `concurrency`, prints the comparison, returns it as JSON.
nlohmann::json compare_structured(const BenchOptions& options, const Dataset& dataset,
                                  int concurrency, int& failures);

}  // namespace nibble::bench

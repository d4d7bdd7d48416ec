#pragma once
// A registry holding every metric type, with awkward label values, for the oracle tests.
#include "metrics/registry.h"

namespace nibble::metrics::testing {

void fill_sample_registry(Registry& registry);

}  // namespace nibble::metrics::testing

#include "tools/ngram-bench/step_cost.h"

#include <sstream>
#include <stdexcept>

namespace nibble::tools {

void parse_verify_cost(const std::string& item, VerifyCosts& costs) {
  std::istringstream in(item);
  int k = 0;
  double all = 0, none = 0;
  char c1 = 0, c2 = 0;
  if (!(in >> k >> c1 >> all >> c2 >> none) || c1 != ':' || c2 != ':' || !(in >> std::ws).eof() ||
      k < 1 || all <= 0 || none <= 0)
    throw std::invalid_argument(
        "--verify-cost takes K:ALL:NONE with K >= 1 and positive costs in "
        "decode steps, got \"" +
        item + "\"");
  costs[k] = {all, none};
}

double charged_steps(const DraftStats& stats, const VerifyCosts& costs) {
  const auto it = costs.find(stats.k);
  if (it == costs.end())
    throw std::invalid_argument("no verify cost measured at k " + std::to_string(stats.k));
  const VerifyCost& c = it->second;
  double charged = double(stats.steps_by[0][0]);
  for (int d = 1; d <= stats.k; ++d)
    for (int a = 0; a <= d; ++a)
      charged += double(stats.steps_by[std::size_t(d)][std::size_t(a)]) *
                 (c.none_accepted + (c.all_accepted - c.none_accepted) * double(a) / double(d));
  return charged;
}

}  // namespace nibble::tools

#include "engine/spec/verify.h"

namespace nibble::spec {

int accept_drafts(std::span<const int> drafts, const std::function<int(int)>& target_token) {
  int accepted = 0;
  while (accepted < int(drafts.size()) && target_token(accepted) == drafts[std::size_t(accepted)]) {
    ++accepted;
  }
  if (accepted == int(drafts.size())) target_token(accepted);  // the bonus token
  return accepted;
}

}  // namespace nibble::spec

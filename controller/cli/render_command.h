#pragma once
// `nibble render -f FILE [-f FILE...] [flags]`: prints the Kubernetes objects the controller's
// Kubernetes backend would apply for each recipe in the files (controller/kube/recipe_objects.h,
// the same pure function), as multi-document YAML `kubectl apply -f -` reads, or with
// `-o json` as one v1 List. Every recipe is validated before anything is printed.
#include <iosfwd>
#include <string>
#include <vector>

namespace nibble::cli {

// args: everything after `render`. Returns the exit status (0 ok, 1 invalid recipe, 2 usage).
int run_render(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
const char* render_usage();

}  // namespace nibble::cli

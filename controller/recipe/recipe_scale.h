#pragma once
// `nibble scale recipe/NAME --replicas N`: sets spec.replicas.desired, the field `kubectl scale`
// writes through the scale subresource. A count outside [spec.replicas.min, max] is refused
// rather than clamped, so the count a user asks for is the count the recipe holds. With the
// built-in autoscaler on, the count is where it resumes, and load moves it from there.
#include <string>

namespace nibble::recipe {

struct ScaleResult {
  std::string yaml;          // the recipe with the new count (to store); "" on error
  std::string error;         // why the count was refused
  bool autoscaling = false;  // spec.autoscaling.enabled: the autoscaler decides from here on
};

// recipe_yaml: the stored recipe; replicas: the count asked for.
ScaleResult scale_recipe(const std::string& recipe_yaml, int replicas);

}  // namespace nibble::recipe

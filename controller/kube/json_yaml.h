#pragma once
// JSON → YAML block text for Kubernetes objects (`nibble render`, `kubectl apply -f` reads it).
// Strings that a YAML 1.1 reader would take for another type (true, on, 1, 0.9, null, ~, 1e3,
// 0x1F, ...) are double-quoted, so every value reads back with the type it had in JSON.
#include <nlohmann/json.hpp>

#include <string>

namespace nibble::kube {

std::string to_yaml(const nlohmann::json& value);

}  // namespace nibble::kube

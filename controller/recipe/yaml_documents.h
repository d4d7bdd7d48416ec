#pragma once
// Splits a multi-document YAML stream (`---` separators, as kubectl accepts) into documents,
// dropping those with nothing but comments and blank lines.
#include <string>
#include <vector>

namespace nibble::recipe {

std::vector<std::string> split_yaml_documents(const std::string& text);

}  // namespace nibble::recipe

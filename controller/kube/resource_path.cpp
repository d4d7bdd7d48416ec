#include "controller/kube/resource_path.h"

#include <cctype>
#include <cstdio>

namespace nibble::kube {

std::string collection_path(const ResourceType& type, const std::string& ns) {
  std::string path =
      type.group.empty() ? "/api/" + type.version : "/apis/" + type.group + "/" + type.version;
  if (type.namespaced && !ns.empty()) path += "/namespaces/" + ns;
  return path + "/" + type.plural;
}

std::string object_path(const ResourceType& type, const std::string& ns, const std::string& name,
                        const std::string& subresource) {
  std::string path = collection_path(type, ns) + "/" + name;
  if (!subresource.empty()) path += "/" + subresource;
  return path;
}

std::string object_key(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

std::pair<std::string, std::string> split_key(const std::string& key) {
  const size_t slash = key.find('/');
  if (slash == std::string::npos) return {"", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

std::string query_escape(const std::string& value) {
  std::string out;
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", u);
      out += buf;
    }
  }
  return out;
}

}  // namespace nibble::kube

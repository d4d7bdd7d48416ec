#include "controller/kube/engine_keys.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <spdlog/spdlog.h>

#include "controller/kube/kube_config.h"
#include "controller/kube/resource_path.h"
#include "http/api_keys.h"

namespace nibble::kube {

using Json = nlohmann::json;

namespace {

std::string seed_of(const Json& secret, const std::string& where) {
  const std::string encoded = secret.value("data", Json::object()).value(kSeedKey, "");
  const std::string seed = base64_decode(encoded);
  // Fewer than 16 bytes would be a seed someone wrote by hand, too weak to derive keys from.
  if (seed.size() < 16) {
    throw KubeError(0, "InvalidSeed",
                    where + ": data." + kSeedKey + " must hold at least 16 bytes (base64)");
  }
  return seed;
}

}  // namespace

std::string derive_engine_key(const std::string& seed, const std::string& ns,
                              const std::string& recipe) {
  const std::string message = "nibble-engine-key/v1\n" + ns + "/" + recipe;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), seed.data(), int(seed.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac,
           &length) == nullptr) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  static const char* const kHex = "0123456789abcdef";
  std::string key;
  for (unsigned int i = 0; i < length; ++i) {
    key += kHex[mac[i] >> 4];
    key += kHex[mac[i] & 15];
  }
  return key;
}

EngineKeys::EngineKeys(const KubeClient& client, std::string namespace_name)
    : client_(client), namespace_name_(std::move(namespace_name)) {}

std::string EngineKeys::seed() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!seed_.empty()) return seed_;
  const std::string path = object_path(kSecrets, namespace_name_, kSeedSecret);
  const std::string where = "Secret " + namespace_name_ + "/" + kSeedSecret;
  try {
    seed_ = seed_of(client_.get(path), where);
    return seed_;
  } catch (const KubeError& e) {
    if (!e.not_found()) throw;
  }
  const Json secret = {{"apiVersion", "v1"},
                       {"kind", "Secret"},
                       {"metadata",
                        {{"name", kSeedSecret},
                         {"namespace", namespace_name_},
                         {"labels",
                          {{"app.kubernetes.io/name", "nibble-controller"},
                           {"app.kubernetes.io/component", "engine-keys"}}}}},
                       {"type", "Opaque"},
                       {"immutable", true},
                       {"data", {{kSeedKey, base64_encode(http::generate_api_key())}}}};
  try {
    seed_ = seed_of(client_.create(collection_path(kSecrets, namespace_name_), secret), where);
    spdlog::info("created {}, the seed of the engines' API keys", where);
  } catch (const KubeError& e) {
    if (!e.conflict()) throw;  // another controller replica created it first: read theirs
    seed_ = seed_of(client_.get(path), where);
  }
  return seed_;
}

std::string EngineKeys::key_for(const std::string& ns, const std::string& recipe) {
  return derive_engine_key(seed(), ns, recipe);
}

}  // namespace nibble::kube

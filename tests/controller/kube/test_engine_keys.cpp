// The engines' API keys on Kubernetes: derived with HMAC-SHA256 (known answers computed with
// `openssl dgst -sha256 -hmac`), from a seed Secret the first controller creates and every
// other one reads, never a different seed.
#include <gtest/gtest.h>

#include "controller/kube/engine_keys.h"
#include "controller/kube/kube_config.h"
#include "tests/controller/kube/fake_api_server.h"

namespace nibble::kube {
namespace {

using Json = nlohmann::json;
constexpr const char* kSecretsType = "/api/v1/secrets";

TEST(EngineKeys, DerivedKeysMatchHmacSha256KnownAnswers) {
  const std::string seed = "0123456789abcdef0123456789abcdef";
  // printf 'nibble-engine-key/v1\nns/qwen' | openssl dgst -sha256 -hmac SEED
  EXPECT_EQ(derive_engine_key(seed, "ns", "qwen"),
            "7d86555abbb0d91c551d8b5e863d23686c056e671a4aad9094e9b2900c1af878");
  EXPECT_EQ(derive_engine_key(seed, "ns", "llama"),
            "5ec17812f57c519264dc38c268fc0e4395a25406e7c0493075aa19c700ae1b01");
  EXPECT_NE(derive_engine_key(seed, "other", "qwen"), derive_engine_key(seed, "ns", "qwen"));
  EXPECT_NE(derive_engine_key(seed + "x", "ns", "qwen"), derive_engine_key(seed, "ns", "qwen"));
}

TEST(EngineKeys, FirstControllerCreatesTheSeedOthersReadIt) {
  testing::FakeApiServer server;
  server.start();
  KubeClient first_client(KubeConfig{server.url()});
  EngineKeys first(first_client, "nibble-system");
  const std::string key = first.key_for("ns", "qwen");
  EXPECT_EQ(key.size(), 64u);
  const auto seed = server.object(kSecretsType, "nibble-system", kSeedSecret);
  ASSERT_TRUE(seed.has_value());
  EXPECT_EQ((*seed)["immutable"], true);
  const std::string seed_bytes = base64_decode((*seed)["data"][kSeedKey]);
  EXPECT_EQ(seed_bytes.size(), 64u);  // 32 random bytes, hex
  EXPECT_EQ(key, derive_engine_key(seed_bytes, "ns", "qwen"));
  // Cached: one read, one create, whatever the number of keys asked for.
  first.key_for("ns", "llama");
  EXPECT_EQ(server.count_requests("POST", "/secrets"), 1);

  // Another replica reads the same seed and computes the same keys.
  KubeClient second_client(KubeConfig{server.url()});
  EngineKeys second(second_client, "nibble-system");
  EXPECT_EQ(second.key_for("ns", "qwen"), key);
  EXPECT_EQ(server.count_requests("POST", "/secrets"), 1);
}

TEST(EngineKeys, LosingTheCreateRaceReadsTheWinnersSeedAndFailuresAreRetried) {
  testing::FakeApiServer server;
  server.start();
  KubeClient client(KubeConfig{server.url()});
  // The seed is missing when read, then another replica creates it first.
  server.fail_next("GET", "/secrets/nibble-engine-key-seed", 404, 1);
  server.put_object(kSecretsType, {{"apiVersion", "v1"},
                                   {"kind", "Secret"},
                                   {"metadata", {{"name", kSeedSecret}, {"namespace", "sys"}}},
                                   {"data", {{kSeedKey, base64_encode(std::string(32, 's'))}}}});
  EngineKeys keys(client, "sys");
  EXPECT_EQ(keys.key_for("ns", "qwen"), derive_engine_key(std::string(32, 's'), "ns", "qwen"));

  // An API server that fails: an error to retry, no key made up.
  testing::FakeApiServer down;
  down.start();
  KubeClient down_client(KubeConfig{down.url()});
  down.fail_next("GET", "/secrets/", 500, 1);
  EngineKeys later(down_client, "sys");
  EXPECT_THROW(later.key_for("ns", "qwen"), KubeError);
  EXPECT_EQ(later.key_for("ns", "qwen").size(), 64u);  // the next try creates the seed
}

TEST(EngineKeys, AWeakSeedWrittenByHandIsRefused) {
  testing::FakeApiServer server;
  server.start();
  server.put_object(kSecretsType, {{"apiVersion", "v1"},
                                   {"kind", "Secret"},
                                   {"metadata", {{"name", kSeedSecret}, {"namespace", "sys"}}},
                                   {"data", {{kSeedKey, base64_encode("short")}}}});
  KubeClient client(KubeConfig{server.url()});
  EngineKeys keys(client, "sys");
  try {
    keys.key_for("ns", "qwen");
    FAIL() << "a 5-byte seed was accepted";
  } catch (const KubeError& e) {
    EXPECT_NE(std::string(e.what()).find("at least 16 bytes"), std::string::npos) << e.what();
  }
}

TEST(EngineKeys, Base64RoundTrips) {
  for (const std::string& s :
       {std::string(""), std::string("f"), std::string("fo"), std::string("foo"),
        std::string("foob"), std::string("\xff\x00\x10", 3)})
    EXPECT_EQ(base64_decode(base64_encode(s)), s);
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
}

}  // namespace
}  // namespace nibble::kube

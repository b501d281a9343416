#include "http/host_header.h"

#include <gtest/gtest.h>

namespace fragscope::http {
namespace {

TEST(HostHeader, AddressesLocalhostAndTheKnownNamesPass) {
  const std::vector<std::string> names = {"gpu-node-7", ""};
  for (const char* host : {"127.0.0.1:9478", "10.244.3.17:9478", "10.244.3.17", "[::1]:9478", "[fd00::17]",
                           "localhost:9478", "LOCALHOST", "gpu-node-7:9478", "GPU-Node-7", ""}) {
    EXPECT_TRUE(host_is_address_or_named(host, names)) << host;
  }
}

TEST(HostHeader, OtherNamesAndMalformedHostsAreRefused) {
  const std::vector<std::string> names = {"gpu-node-7"};
  for (const char* host : {"attacker.example:9478", "gpu-node-7.attacker.example", "localhost.attacker.example",
                           "127.0.0.1.nip.io:9478", "[::1", "[::1]x", "[not-an-address]:1", "127.0.0.1:port",
                           "10.0.0.1:", "gpu-node-8"}) {
    EXPECT_FALSE(host_is_address_or_named(host, names)) << host;
  }
  EXPECT_FALSE(host_is_address_or_named("anything", {}));
}

TEST(HostHeader, SplitGivesTheNameWithoutBracketsAndThePortText) {
  const auto v6 = split_host("[fd00::17]:9478");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->name, "fd00::17");
  EXPECT_EQ(v6->port, "9478");
  EXPECT_TRUE(v6->bracketed);
  const auto named = split_host("gpu-node-7");
  ASSERT_TRUE(named);
  EXPECT_EQ(named->name, "gpu-node-7");
  EXPECT_EQ(named->port, "");
  EXPECT_FALSE(names_an_address(*named));
  EXPECT_TRUE(names_an_address(*split_host("LocalHost:80")));
  EXPECT_FALSE(names_an_address(*split_host("[localhost]")));  // brackets hold an IPv6 literal only
  for (const char* malformed : {"[::1", "[::1]x", "[::1]:", "10.0.0.1:", "10.0.0.1:80x"})
    EXPECT_FALSE(split_host(malformed)) << malformed;
}

}  // namespace
}  // namespace fragscope::http

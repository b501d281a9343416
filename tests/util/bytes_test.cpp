#include "util/bytes.h"

#include <gtest/gtest.h>

namespace fragscope {
namespace {

TEST(FormatBytes, MatchesPyTorchOomMessageStrings) {
  // From frag_oom_104's real OOM message: 1654784000 B is "1.54 GiB", 1066532864 B is "1017.12 MiB".
  EXPECT_EQ(format_bytes(1654784000), "1.54 GiB");
  EXPECT_EQ(format_bytes(1066532864), "1017.12 MiB");
  EXPECT_EQ(format_bytes(512), "512 bytes");
  EXPECT_EQ(format_bytes(2 * kMiB), "2.00 MiB");
  EXPECT_EQ(format_signed_bytes(-static_cast<std::int64_t>(2 * kMiB)), "-2.00 MiB");
}

TEST(ParseBytes, ReadsBinaryAndDecimalUnits) {
  EXPECT_EQ(parse_bytes("2.00 MiB"), 2 * kMiB);
  EXPECT_EQ(parse_bytes("1 GiB"), kGiB);
  EXPECT_EQ(parse_bytes("40GB"), 40000000000ull);
  EXPECT_EQ(parse_bytes("42805960704"), 42805960704ull);
  EXPECT_EQ(parse_bytes("12 bytes"), 12u);
  EXPECT_FALSE(parse_bytes("lots"));
  EXPECT_FALSE(parse_bytes("12 parsecs"));
  EXPECT_FALSE(parse_bytes(""));
}

}  // namespace
}  // namespace fragscope

#include "alloc/alloc_config.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace fragscope::alloc {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

TEST(AllocConfigTest, EmptyStringGivesPyTorchDefaults) {
  const AllocConfig c = parse_alloc_conf("");
  EXPECT_EQ(c.max_split_size, kNoSplitLimit);
  EXPECT_EQ(c.max_non_split_rounding, 20 * kMiB);
  EXPECT_EQ(c.large_segment_size, 20 * kMiB);
  EXPECT_FALSE(c.expandable_segments);
  EXPECT_EQ(c.garbage_collection_threshold, 0.0);
  for (auto d : c.roundup_power2_divisions) EXPECT_EQ(d, 0u);
  EXPECT_EQ(to_alloc_conf(c), "");
}

TEST(AllocConfigTest, ParsesEveryModelledKey) {
  const AllocConfig c = parse_alloc_conf(
      " max_split_size_mb:128, max_non_split_rounding_mb:64,garbage_collection_threshold:0.8,"
      "expandable_segments:True,large_segment_size_mb:40,roundup_power2_divisions:4");
  EXPECT_EQ(c.max_split_size, 128 * kMiB);
  EXPECT_EQ(c.max_non_split_rounding, 64 * kMiB);
  EXPECT_DOUBLE_EQ(c.garbage_collection_threshold, 0.8);
  EXPECT_TRUE(c.expandable_segments);
  EXPECT_EQ(c.large_segment_size, 40 * kMiB);
  for (auto d : c.roundup_power2_divisions) EXPECT_EQ(d, 4u);
}

TEST(AllocConfigTest, RoundupListFillsLowerIntervalsAndTheRest) {
  // As PyTorch: the first entry also covers every interval below; '>' fills from the last one.
  const AllocConfig c = parse_alloc_conf("roundup_power2_divisions:[64:8,256:4,1024:4,>:1]");
  const auto& d = c.roundup_power2_divisions;
  for (int i = 0; i <= 6; ++i) EXPECT_EQ(d[i], 8u) << i;  // 1..64 MiB
  EXPECT_EQ(d[7], 0u);                                     // 128 MiB: not listed
  EXPECT_EQ(d[8], 4u);                                     // 256 MiB
  EXPECT_EQ(d[9], 0u);
  for (int i = 10; i < 16; ++i) EXPECT_EQ(d[i], 1u) << i;  // '>' from 1024 MiB, inclusive
}

TEST(AllocConfigTest, IgnoredKeysAreStillValidated) {
  EXPECT_NO_THROW(parse_alloc_conf("release_lock_on_cudamalloc:True,backend:native,"
                                   "pinned_use_cuda_host_register:False,pinned_num_register_threads:8"));
  EXPECT_THROW(parse_alloc_conf("release_lock_on_cudamalloc:yes"), InputError);
  EXPECT_THROW(parse_alloc_conf("pinned_num_register_threads:3"), InputError);
}

TEST(AllocConfigTest, ErrorsNameTheKey) {
  auto message = [](const char* conf) {
    try {
      parse_alloc_conf(conf);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("max_split_size_mb:10").find("'max_split_size_mb'"), std::string::npos);
  EXPECT_NE(message("max_split_size_mb:10").find("too small"), std::string::npos);
  EXPECT_NE(message("expandable_segment:True").find("'expandable_segment'"), std::string::npos);
  EXPECT_NE(message("expandable_segments:true").find("True/False"), std::string::npos);
  EXPECT_NE(message("garbage_collection_threshold:1.5").find("'garbage_collection_threshold'"),
            std::string::npos);
  EXPECT_NE(message("roundup_power2_divisions:3").find("power of 2"), std::string::npos);
  EXPECT_NE(message("roundup_power2_divisions:[100:2]").find("interval"), std::string::npos);
  EXPECT_NE(message("max_split_size_mb").find("'max_split_size_mb'"), std::string::npos);
  EXPECT_NE(message("max_split_size_mb:abc").find("'abc'"), std::string::npos);
  EXPECT_NE(message("backend:cudaMallocAsync").find("not modelled"), std::string::npos);
  EXPECT_EQ(message("max_split_size_mb:20"), "no error");  // 20 MiB is PyTorch's minimum
  // One line, starting with the variable's name.
  EXPECT_EQ(message("bogus:1").rfind("PYTORCH_CUDA_ALLOC_CONF: ", 0), 0u);
  EXPECT_EQ(message("bogus:1").find('\n'), std::string::npos);
}

TEST(AllocConfigTest, CanonicalStringRoundTrips) {
  for (const char* conf :
       {"expandable_segments:True", "max_split_size_mb:256,roundup_power2_divisions:4",
        "roundup_power2_divisions:[2:4,512:8]", "garbage_collection_threshold:0.6",
        "roundup_power2_divisions:[64:8,256:4,1024:4,>:1]",
        "expandable_segments:True,max_non_split_rounding_mb:40,large_segment_size_mb:32"}) {
    const AllocConfig c = parse_alloc_conf(conf);
    EXPECT_EQ(parse_alloc_conf(to_alloc_conf(c)), c) << conf << " -> " << to_alloc_conf(c);
  }
  EXPECT_EQ(to_alloc_conf(parse_alloc_conf("roundup_power2_divisions:4,max_split_size_mb:256")),
            "max_split_size_mb:256,roundup_power2_divisions:4");
}

}  // namespace
}  // namespace fragscope::alloc

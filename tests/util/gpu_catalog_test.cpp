#include "util/gpu_catalog.h"

#include <gtest/gtest.h>

#include "util/bytes.h"

namespace fragscope {
namespace {

TEST(GpuCatalog, H200MatchesTheFixturesSmiTotal) {
  // Every fixture's smi.csv: "memory.total [MiB]" = 143771 MiB on the recording H200.
  const GpuSpec* h200 = find_gpu("H200");
  ASSERT_NE(h200, nullptr);
  EXPECT_EQ(h200->total_bytes, 143771 * kMiB);
  // The OOM messages say "total capacity of 139.80 GiB" (cudaMemGetInfo: 150109880320 B):
  // the reserve must cover at least the driver's part of the difference.
  EXPECT_GE(h200->context_reserve_bytes, h200->total_bytes - 150109880320ull);
  // plan_p1: memory.used 38069 MiB with 39113981952 B reserved by PyTorch, so the process
  // context is ~767 MiB; the allocator can reserve what is left.
  EXPECT_EQ(h200->usable_bytes(), 143771 * kMiB - h200->context_reserve_bytes);
  EXPECT_LT(h200->usable_bytes(), 150109880320ull);
}

TEST(GpuCatalog, FindsNamesCaseInsensitivelyAndByProductAlias) {
  EXPECT_EQ(find_gpu("h200"), find_gpu("H200"));
  EXPECT_EQ(find_gpu("H100 80GB"), find_gpu("H100-80GB"));
  EXPECT_EQ(find_gpu("a100-sxm4-80gb"), find_gpu("A100-80GB"));
  EXPECT_EQ(find_gpu("NVIDIA H100 NVL"), find_gpu("H100-94GB"));
  EXPECT_EQ(find_gpu("a100_40gb")->total_bytes, 40960 * kMiB);
  EXPECT_EQ(find_gpu("B200")->total_bytes, 183359 * kMiB);
  EXPECT_EQ(find_gpu("L40S")->mig_profiles.size(), 0u);
  EXPECT_EQ(find_gpu("RTX-9090"), nullptr);
  EXPECT_EQ(find_gpu(""), nullptr);
}

TEST(GpuCatalog, H200MigProfilesFollowTheAnchorTable) {
  // anchors.md: 1g.18gb×7, 1g.35gb×4, 2g.35gb×3, 3g.71gb×2, 4g.71gb×1, 7g.141gb×1.
  const GpuSpec& h200 = *find_gpu("H200");
  ASSERT_EQ(h200.mig_profiles.size(), 6u);
  const MigProfile* p = find_mig_profile(h200, "3G.71GB");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->max_instances, 2);
  EXPECT_EQ(p->compute_slices, 3);
  EXPECT_EQ(p->memory_bytes, 143771 * kMiB / 2);
  EXPECT_EQ(find_mig_profile(h200, "1g.18gb")->max_instances, 7);
  EXPECT_EQ(find_mig_profile(h200, "1g.18gb")->memory_bytes, 143771 * kMiB / 8);
  EXPECT_EQ(find_mig_profile(h200, "3g.40gb"), nullptr);  // an A100/H100 profile
}

TEST(GpuCatalog, NoSliceIsLargerThanItsCardAndUsableNeverExceedsTheSlice) {
  for (auto name : gpu_names()) {
    const GpuSpec& gpu = *find_gpu(name);
    EXPECT_LT(gpu.context_reserve_bytes, gpu.total_bytes) << name;
    for (const auto& slice : gpu.mig_profiles) {
      EXPECT_LE(slice.memory_bytes, gpu.total_bytes) << name << " " << slice.name;
      EXPECT_LE(gpu.usable_bytes(slice), slice.memory_bytes) << name << " " << slice.name;
      EXPECT_GE(slice.max_instances, 1);
      EXPECT_LE(slice.max_instances * slice.compute_slices, 7) << name << " " << slice.name;
    }
  }
}

TEST(GpuCatalog, H100LgipFiguresAreUsedWhereKnown) {
  // nvidia-smi mig -lgip on an H100-80GB reports 9.75 GiB for 1g.10gb and 79.25 GiB for 7g.80gb.
  const GpuSpec& h100 = *find_gpu("H100-80GB");
  EXPECT_EQ(find_mig_profile(h100, "1g.10gb")->memory_bytes, 9984 * kMiB);
  EXPECT_EQ(find_mig_profile(h100, "7g.80gb")->memory_bytes, 81152 * kMiB);
}

TEST(GpuCatalog, NamesListEveryCardOnce) {
  const auto names = gpu_names();
  EXPECT_EQ(names.size(), 7u);
  EXPECT_EQ(gpu_names_joined(), "A100-40GB, A100-80GB, H100-80GB, H100-94GB, H200, B200, L40S");
}

}  // namespace
}  // namespace fragscope

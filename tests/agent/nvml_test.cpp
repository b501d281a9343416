#include "agent/nvml.h"

#include <gtest/gtest.h>

namespace fragscope::agent {
namespace {

TEST(NvmlTest, MissingLibraryIsDownWithAReason) {
  const Nvml nvml("libnvidia-ml-does-not-exist.so.1");
  EXPECT_FALSE(nvml.up());
  EXPECT_NE(nvml.problem().find("cannot load libnvidia-ml-does-not-exist.so.1"), std::string::npos) << nvml.problem();
  const NvmlSample sample = nvml.sample();
  EXPECT_FALSE(sample.up);
  EXPECT_TRUE(sample.gpus.empty());
  EXPECT_EQ(sample.problem, nvml.problem());
}

TEST(NvmlTest, LibraryWithoutTheEntryPointsIsDown) {
  const Nvml nvml("libz.so.1");  // loads, but is no NVML
  EXPECT_FALSE(nvml.up());
  EXPECT_NE(nvml.problem().find("lacks nvmlInit_v2"), std::string::npos) << nvml.problem();
}

TEST(NvmlTest, ReadsMemoryUtilisationProcessesAndMigThroughDlopen) {
  const Nvml nvml(FRAGSCOPE_FAKE_NVML);
  ASSERT_TRUE(nvml.up()) << nvml.problem();
  const NvmlSample sample = nvml.sample();
  ASSERT_TRUE(sample.up);
  ASSERT_EQ(sample.gpus.size(), 2u);

  const GpuSample& first = sample.gpus[0];
  EXPECT_EQ(first.index, 0u);
  EXPECT_EQ(first.uuid, "GPU-aaaaaaaa-0000-0000-0000-000000000000");
  EXPECT_EQ(first.total_bytes, 150'754'820'096u);
  EXPECT_EQ(first.used_bytes, 140'000'000'000u);
  EXPECT_EQ(first.free_bytes, 10'754'820'096u);
  ASSERT_TRUE(first.utilization_ratio.has_value());
  EXPECT_DOUBLE_EQ(*first.utilization_ratio, 0.87);
  EXPECT_FALSE(first.mig_enabled);
  ASSERT_EQ(first.processes.size(), 3u);
  EXPECT_EQ(first.processes[0].pid, 1001u);
  EXPECT_EQ(first.processes[0].used_bytes, 100'000'000'000u);
  EXPECT_EQ(first.processes[1].used_bytes, 30'000'000'000u);
  EXPECT_FALSE(first.processes[2].used_bytes.has_value());

  const GpuSample& second = sample.gpus[1];
  EXPECT_FALSE(second.utilization_ratio.has_value());
  EXPECT_TRUE(second.mig_enabled);
  ASSERT_EQ(second.mig_instances.size(), 2u);
  EXPECT_EQ(second.mig_instances[0].gpu_instance_id, 1u);
  EXPECT_EQ(second.mig_instances[0].used_bytes, 1'000'000'000u);
  EXPECT_EQ(second.mig_instances[1].gpu_instance_id, 2u);
  EXPECT_EQ(second.mig_instances[1].total_bytes, 71'000'000'000u);
}

}  // namespace
}  // namespace fragscope::agent

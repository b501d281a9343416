#include "agent/nvml.h"

#include <unistd.h>

#include <filesystem>
#include <string>

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

// Audit: _v3 was read as 24-byte entries, but drivers 535.43 to 535.86 write 32-byte ones: with
// 13 or more processes they overran the agent's buffer, and every pid after the first was wrong.
TEST(NvmlTest, ProcessListOfDrivers535_43To535_86IsReadWithItsOwnEntrySize) {
  Nvml nvml(FRAGSCOPE_FAKE_NVML_535_86);
  ASSERT_TRUE(nvml.up()) << nvml.problem();
  const NvmlSample sample = nvml.sample();
  ASSERT_EQ(sample.gpus.size(), 2u);
  const auto& processes = sample.gpus[0].processes;
  ASSERT_EQ(processes.size(), 14u);
  for (std::uint32_t i = 0; i < 14; ++i) {
    EXPECT_EQ(processes[i].pid, 2001 + i);
    EXPECT_EQ(processes[i].used_bytes, (i + 1) * 1'000'000'000ull);
  }
}

// Audit: _v3 was required, so 535.98 (which has none) turned every NVML metric off.
TEST(NvmlTest, ADriverWithoutV3KeepsItsDeviceMetricsAndReadsV2) {
  Nvml nvml(FRAGSCOPE_FAKE_NVML_535_98);
  ASSERT_TRUE(nvml.up()) << nvml.problem();
  const NvmlSample sample = nvml.sample();
  ASSERT_EQ(sample.gpus.size(), 2u);
  EXPECT_EQ(sample.gpus[0].used_bytes, 140'000'000'000u);
  ASSERT_EQ(sample.gpus[0].processes.size(), 3u);
  EXPECT_EQ(sample.gpus[0].processes[1].pid, 1002u);
}

TEST(NvmlTest, ALibraryThatAppearsLaterIsLoadedOnRetry) {
  const auto path = std::filesystem::temp_directory_path() / ("fragscope-late-nvml-" + std::to_string(::getpid()));
  Nvml nvml(path.string());
  EXPECT_FALSE(nvml.up());
  EXPECT_FALSE(nvml.retry());
  std::filesystem::copy_file(FRAGSCOPE_FAKE_NVML, path);
  EXPECT_TRUE(nvml.retry()) << nvml.problem();
  EXPECT_EQ(nvml.problem(), "");
  EXPECT_EQ(nvml.sample().gpus.size(), 2u);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace fragscope::agent

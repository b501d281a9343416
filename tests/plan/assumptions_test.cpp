#include "plan/assumptions.h"

#include <filesystem>

#include <gtest/gtest.h>

namespace fragscope::plan {
namespace {

const std::filesystem::path kExamples = std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "examples";

const Assumption& find(const std::vector<Assumption>& all, std::string_view key) {
  for (const auto& a : all)
    if (a.key == key) return a;
  static const Assumption none;
  ADD_FAILURE() << "no " << key;
  return none;
}

TEST(Assumptions, EveryPlanSaysItsRegimeOptimizerKernelAndAllocator) {
  JobSpec seed = read_job_spec(kExamples / "seed-13b.toml");
  auto all = assumptions(seed);
  EXPECT_NE(find(all, "precision_regime").meaning.find("torch.autocast(bfloat16) over fp32 parameters"),
            std::string::npos);
  EXPECT_NE(find(all, "precision_regime").meaning.find("FSDP gathers fp32 parameters"), std::string::npos);
  EXPECT_EQ(find(all, "optimizer_implementation").value, "foreach");
  EXPECT_EQ(find(all, "attention_kernel").value, "sdpa");
  EXPECT_EQ(find(all, "allocator").value, "default");
  seed.training.precision = Precision::kMixedBf16;
  seed.hardware.alloc_config.expandable_segments = true;
  all = assumptions(seed);
  EXPECT_NE(find(all, "precision_regime").meaning.find("MixedPrecisionPolicy(param_dtype=bf16"), std::string::npos);
  EXPECT_EQ(find(all, "allocator").value, "expandable_segments:True");
  EXPECT_EQ(find(all, "eval").value, "none");
  EXPECT_FALSE(left_out().empty());
}

TEST(Assumptions, VariableLengthsSayTheDraw) {
  const JobSpec mig = read_job_spec(kExamples / "llama3-8b-mig.toml");
  const Assumption& lengths = find(assumptions(mig), "sequence_lengths");
  EXPECT_EQ(lengths.value, "variable");
  EXPECT_NE(lengths.meaning.find("4 seeded draws of 128 micro-steps, each ending on 2048"), std::string::npos);
  EXPECT_EQ(find(assumptions(mig), "optimizer_implementation").value, "bitsandbytes");
}

TEST(Assumptions, DdpOverMigSlicesIsAWarning) {
  JobSpec p1 = read_job_spec(kExamples / "plan_p1.toml");
  EXPECT_TRUE(warnings(p1).empty());
  p1.hardware.mig = "3g.71gb";
  p1.parallel.strategy = Strategy::kDdp;
  p1.parallel.world_size = 2;
  const auto w = warnings(p1);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].rfind("ddp over 2 MIG slices", 0), 0u);
}

}  // namespace
}  // namespace fragscope::plan

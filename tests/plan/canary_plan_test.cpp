#include "plan/canary_plan.h"

#include <filesystem>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "plan/job_spec.h"
#include "plan/memory_model.h"
#include "util/bytes.h"

namespace fragscope::plan {
namespace {

const std::filesystem::path kExamples = std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "examples";

TEST(CanaryPlan, CriteriaFileHasEveryKeyOfTheSharedFormat) {
  const JobSpec seed = read_job_spec(kExamples / "seed-13b.toml");
  const CanaryPlan plan = canary_plan(seed, estimate_memory(seed), "seed.criteria.json");
  std::ostringstream out;
  inputs::write_acceptance_criteria(out, plan.criteria);
  const auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j.at("version"), 1);
  EXPECT_EQ(j.at("device_memory_bytes"), 81920ull * kMiB);  // A100-80GB memory.total
  EXPECT_DOUBLE_EQ(j.at("max_hbm_fraction"), 0.90);
  EXPECT_DOUBLE_EQ(j.at("max_data_wait_fraction"), 0.10);
  EXPECT_DOUBLE_EQ(j.at("max_gpu_idle_fraction"), 0.10);
  EXPECT_EQ(j.at("allow_oom"), false);
  EXPECT_EQ(j.at("max_alloc_retries"), 0);
  EXPECT_EQ(j.at("required_phases"), nlohmann::json({"train", "eval", "checkpoint"}));
  EXPECT_DOUBLE_EQ(j.at("max_step_time_spread"), 0.15);
  EXPECT_DOUBLE_EQ(j.at("max_throughput_spread"), 0.15);
  EXPECT_EQ(j.at("warmup_steps"), 2);
  EXPECT_EQ(j.size(), 11u);
}

TEST(CanaryPlan, StepsCoverTrainingThenCheckpointAndEvalThenTheCheck) {
  const JobSpec seed = read_job_spec(kExamples / "seed-13b.toml");
  const MemoryEstimate e = estimate_memory(seed);
  const CanaryPlan plan = canary_plan(seed, e, "seed.criteria.json");
  ASSERT_EQ(plan.steps.size(), 4u);
  EXPECT_NE(plan.steps[0].detail.find("all 8 ranks"), std::string::npos);
  EXPECT_NE(plan.steps[1].detail.find("checkpoint"), std::string::npos);
  EXPECT_NE(plan.steps[1].detail.find("eval"), std::string::npos);
  EXPECT_NE(plan.steps[2].detail.find("--criteria seed.criteria.json"), std::string::npos);
  // At least warm-up + 10 optimizer steps of grad_accum 16.
  EXPECT_EQ(plan.micro_steps, (2 + 10) * 16u);
  EXPECT_DOUBLE_EQ(plan.predicted_hbm_fraction,
                   static_cast<double>(e.peak_reserved_bytes) / static_cast<double>(e.device_bytes));
}

TEST(CanaryPlan, VariableLengthsForceTheLongestSequenceEarly) {
  const JobSpec mig = read_job_spec(kExamples / "llama3-8b-mig.toml");
  const CanaryPlan plan = canary_plan(mig, estimate_memory(mig), "c.json");
  EXPECT_NE(plan.steps[0].detail.find("longest length (2048 tokens)"), std::string::npos);
  EXPECT_EQ(plan.criteria.device_memory_bytes, 143771ull * kMiB / 2);  // the 3g.71gb slice
}

}  // namespace
}  // namespace fragscope::plan

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
  EXPECT_DOUBLE_EQ(j.at("max_step_time_spread"), 0.15);  // fixed lengths: noise only
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
  // Whole optimizer steps: warm-up + 10 of grad_accum 16, and the text says the same numbers.
  EXPECT_EQ(plan.optimizer_steps, 12u);
  EXPECT_EQ(plan.micro_steps, 12 * 16u);
  EXPECT_NE(plan.steps[0].detail.find("192 micro-steps (12 optimizer steps of grad_accum 16)"), std::string::npos);
  EXPECT_EQ(plan.predicted_peak_reserved_bytes, e.peak_reserved_bytes);
  EXPECT_DOUBLE_EQ(plan.predicted_hbm_fraction, e.hbm_fraction());
  // The plan's assumptions go with it.
  EXPECT_NE(plan.steps[0].detail.find("precision_regime = amp-bf16"), std::string::npos);
}

TEST(CanaryPlan, MicroStepsAreWholeOptimizerSteps) {
  // The "50 micro-steps (12 optimizer steps of grad_accum 4)".
  JobSpec seed = read_job_spec(kExamples / "seed-13b.toml");
  for (std::uint64_t ga : {1u, 3u, 4u, 7u, 32u}) {
    seed.training.grad_accum = ga;
    seed.training.global_batch.reset();
    const CanaryPlan plan = canary_plan(seed, estimate_memory(read_job_spec(kExamples / "plan_p1.toml")), "c.json");
    EXPECT_EQ(plan.micro_steps, plan.optimizer_steps * ga) << ga;
    EXPECT_GE(plan.micro_steps, 50u) << ga;
    EXPECT_GE(plan.optimizer_steps, 12u) << ga;
  }
}

TEST(CanaryPlan, TheLastStepDoesNotRepeatTheFirst) {
  const JobSpec p1 = read_job_spec(kExamples / "plan_p1.toml");
  const CanaryPlan plan = canary_plan(p1, estimate_memory(p1), "c.json", "training.micro_batch_size=2");
  ASSERT_EQ(plan.steps.size(), 5u);
  EXPECT_EQ(plan.steps.front().title, "Apply the recommended change");
  EXPECT_EQ(plan.steps.back().title, "If a criterion fails");
  EXPECT_EQ(plan.steps.back().detail.find("Apply the recommended"), std::string::npos);
}

TEST(CanaryPlan, SpreadLimitsSuitTheLengths) {
  // Fixed lengths: noise only. Variable lengths: the spread the draw itself causes, plus the
  // noise allowance; the fixtures' variable-length runs measured 20-96% (fid_default's recorder).
  const JobSpec fixed = read_job_spec(kExamples / "plan_p1.toml");
  const CanaryPlan a = canary_plan(fixed, estimate_memory(fixed), "c.json");
  EXPECT_DOUBLE_EQ(a.criteria.max_step_time_spread, kNoiseSpread);
  EXPECT_DOUBLE_EQ(a.criteria.max_throughput_spread, kNoiseSpread);
  JobSpec variable = fixed;
  variable.training.variable_length = true;
  variable.training.seq_len = 4096;
  variable.training.min_seq_len = 256;
  variable.training.median_seq_len = 1097;
  variable.training.grad_accum = 4;
  const CanaryPlan b = canary_plan(variable, estimate_memory(variable), "c.json");
  EXPECT_GT(b.predicted_step_time_spread, 0.3);
  EXPECT_LT(b.predicted_step_time_spread, 1.5);
  EXPECT_DOUBLE_EQ(b.criteria.max_step_time_spread, b.predicted_step_time_spread + kNoiseSpread);
  EXPECT_DOUBLE_EQ(b.criteria.max_throughput_spread, b.predicted_throughput_spread + kNoiseSpread);
}

TEST(CanaryPlan, VariableLengthsForceTheLongestSequenceEarly) {
  const JobSpec mig = read_job_spec(kExamples / "llama3-8b-mig.toml");
  const CanaryPlan plan = canary_plan(mig, estimate_memory(mig), "c.json");
  EXPECT_NE(plan.steps[0].detail.find("longest length (2048 tokens)"), std::string::npos);
  EXPECT_EQ(plan.criteria.device_memory_bytes, 143771ull * kMiB / 2);  // the 3g.71gb slice
}

TEST(CanaryPlan, AtTheGradAccumLimitTheSpreadDrawsEightOptimizerSteps) {
  // 4096 steps of 2^20 micro-steps would be 2^32 draws; past 2^23 micro-steps fewer steps are
  // drawn, and a step's time, a sum of a million lengths, hardly varies.
  JobSpec variable = read_job_spec(kExamples / "plan_p1.toml");
  variable.training.variable_length = true;
  variable.training.grad_accum = 1u << 20;
  const auto [time_spread, rate_spread] = length_spreads(variable);
  const auto eight = length_spreads(variable, 8);
  EXPECT_EQ(time_spread, eight.first);
  EXPECT_EQ(rate_spread, eight.second);
  EXPECT_LT(time_spread, 0.01);
}

}  // namespace
}  // namespace fragscope::plan

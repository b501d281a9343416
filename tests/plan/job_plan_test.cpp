#include "plan/job_plan.h"

#include <filesystem>

#include <gtest/gtest.h>

namespace fragscope::plan {
namespace {

const std::filesystem::path kExamples = std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "examples";

TEST(JobPlan, OnlyTheEstimateUnlessMoreIsAsked) {
  const JobSpec seed = read_job_spec(kExamples / "seed-13b.toml");
  const JobPlan plan = plan_job(seed, {});
  EXPECT_FALSE(plan.estimate.within_hbm_limit);  // the example does not fit as specified
  EXPECT_FALSE(plan.proposals);
  EXPECT_FALSE(plan.canary);
  EXPECT_FALSE(plan.largest);
}

TEST(JobPlan, AGlobalBatchAsksForProposalsAtThatBatch) {
  const JobSpec seed = read_job_spec(kExamples / "seed-13b.toml");
  PlanRequest request;
  request.global_batch = 64;
  const JobPlan plan = plan_job(seed, request);
  ASSERT_TRUE(plan.proposals);
  EXPECT_EQ(plan.proposals->target_global_batch, 64u);
  EXPECT_FALSE(plan.canary);
}

TEST(JobPlan, TheCanaryOfAJobThatDoesNotFitValidatesTheRecommendedChange) {
  const JobSpec seed = read_job_spec(kExamples / "seed-13b.toml");
  PlanRequest request;
  request.canary = true;
  request.criteria_path = "seed.criteria.json";
  const JobPlan plan = plan_job(seed, request);
  EXPECT_FALSE(plan.proposals);  // worked out for the canary, not shown: they were not asked for
  ASSERT_TRUE(plan.canary);
  const ProposalSet proposals = propose(seed, plan.estimate, std::nullopt);
  ASSERT_TRUE(proposals.recommended);
  const Proposal& change = proposals.proposals[*proposals.recommended];
  EXPECT_EQ(plan.canary->predicted_peak_reserved_bytes, change.estimate.peak_reserved_bytes);
  EXPECT_EQ(plan.canary->predicted_hbm_fraction, change.estimate.hbm_fraction());
  EXPECT_EQ(plan.canary->change, change.change);
  ASSERT_FALSE(plan.canary->steps.empty());
  EXPECT_NE(plan.canary->steps.front().detail.find(change.change), std::string::npos);
  EXPECT_EQ(plan.exit_status, 0);  // the configuration it validates is within the limits
}

TEST(JobPlan, TheCanaryOfAJobThatFitsRunsTheJobAsSpecified) {
  const JobSpec p1 = read_job_spec(kExamples / "plan_p1.toml");
  PlanRequest request;
  request.canary = true;
  const JobPlan plan = plan_job(p1, request);
  ASSERT_TRUE(plan.estimate.within_hbm_limit);
  ASSERT_TRUE(plan.canary);
  EXPECT_EQ(plan.canary->predicted_hbm_fraction, plan.estimate.hbm_fraction());
  for (const CanaryStep& step : plan.canary->steps) EXPECT_NE(step.title, "Apply the recommended change");
}

TEST(JobPlan, ExitStatusFollowsTheConfigurationTheOutputTellsToRun) {
  const JobSpec seed = read_job_spec(kExamples / "seed-13b.toml");
  PlanRequest plain;
  EXPECT_EQ(plan_job(seed, plain).exit_status, 1);  // as specified it does not fit
  PlanRequest canary;
  canary.canary = true;
  const JobPlan with_canary = plan_job(seed, canary);
  ASSERT_TRUE(with_canary.canary);
  EXPECT_FALSE(with_canary.canary->change.empty());  // it validates the recommended change
  EXPECT_EQ(with_canary.exit_status, 0);
  EXPECT_FALSE(with_canary.proposals);  // worked out for the canary, not asked for
}

TEST(JobPlan, NoConfigurationWithinTheLimitsMeansNoCanary) {
  JobSpec huge = read_job_spec(kExamples / "plan_p1.toml");
  huge.model.num_layers = 400;
  huge.hardware.gpu = "L40S";
  PlanRequest canary;
  canary.canary = true;
  canary.propose = true;
  const JobPlan plan = plan_job(huge, canary);
  EXPECT_FALSE(plan.canary);
  EXPECT_EQ(plan.exit_status, 1);
  EXPECT_EQ(plan.verdict.rfind("DOES NOT FIT", 0), 0u);
}

TEST(JobPlan, VerdictsNameTheLimitAndTheFigures) {
  JobSpec p1 = read_job_spec(kExamples / "plan_p1.toml");
  EXPECT_EQ(plan_job(p1, {}).verdict.rfind("FITS: peak reserved 36.43 GiB (25.9% of the 140.40 GiB device)", 0), 0u);
  p1.training.micro_batch_size = 23;
  const JobPlan above = plan_job(p1, {});
  EXPECT_EQ(above.verdict.rfind("FITS ABOVE THE CANARY'S LIMIT", 0), 0u);
  EXPECT_NE(above.verdict.find("over the canary's 90.0%"), std::string::npos);
  EXPECT_EQ(above.exit_status, 1);
}

}  // namespace
}  // namespace fragscope::plan

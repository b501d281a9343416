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
  const ProposalSet proposals = propose(seed, std::nullopt);
  ASSERT_TRUE(proposals.recommended);
  const Proposal& change = proposals.proposals[*proposals.recommended];
  EXPECT_EQ(plan.canary->predicted_hbm_fraction, static_cast<double>(change.estimate.peak_reserved_bytes) /
                                                     static_cast<double>(change.estimate.device_bytes));
  ASSERT_FALSE(plan.canary->steps.empty());
  EXPECT_NE(plan.canary->steps.front().detail.find(change.change), std::string::npos);
}

TEST(JobPlan, TheCanaryOfAJobThatFitsRunsTheJobAsSpecified) {
  const JobSpec p1 = read_job_spec(kExamples / "plan_p1.toml");
  PlanRequest request;
  request.canary = true;
  const JobPlan plan = plan_job(p1, request);
  ASSERT_TRUE(plan.estimate.within_hbm_limit);
  ASSERT_TRUE(plan.canary);
  EXPECT_EQ(plan.canary->predicted_hbm_fraction, static_cast<double>(plan.estimate.peak_reserved_bytes) /
                                                     static_cast<double>(plan.estimate.device_bytes));
  for (const CanaryStep& step : plan.canary->steps) EXPECT_NE(step.title, "Apply the recommended change");
}

}  // namespace
}  // namespace fragscope::plan

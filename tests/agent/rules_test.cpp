#include "agent/rules.h"

#include <gtest/gtest.h>

namespace fragscope::agent {
namespace {

using std::chrono::seconds;

RankView rank_view(const std::string& file, std::int32_t gpu) {
  RankView rank;
  rank.file_name = file;
  rank.gpu = gpu;
  rank.record.rank = gpu;
  // calib's step 1 (fixtures/calib/steps.jsonl): 2.40 GB split out of 52.9 GB reserved.
  rank.record.reserved_bytes = 52'865'007'616;
  rank.record.inactive_split_bytes = 2'396'399'104;
  rank.record.device_total_bytes = 150'754'820'096;
  return rank;
}

Thresholds immediate() {
  Thresholds t;
  t.hold_for = seconds(0);
  return t;
}

TEST(RuleEvaluatorTest, HealthyRankFiresNothing) {
  RuleEvaluator rules(immediate());
  NodeView view;
  view.ranks.push_back(rank_view("r0", 0));
  EXPECT_TRUE(rules.evaluate(view, std::chrono::steady_clock::now()).empty());
}

TEST(RuleEvaluatorTest, FragmentationAndDataWaitFirePerRank) {
  RuleEvaluator rules(immediate());
  NodeView view;
  view.ranks.push_back(rank_view("r0", 0));
  view.ranks[0].record.inactive_split_bytes = 20'000'000'000;  // 0.378 of reserved
  view.ranks[0].record.data_wait_ratio = 0.9102;               // input_bound's fraction
  const auto alerts = rules.evaluate(view, std::chrono::steady_clock::now());
  ASSERT_EQ(alerts.size(), 2u);
  EXPECT_EQ(alerts[0].rule, Rule::kFragmentation);
  EXPECT_NEAR(alerts[0].value, 0.3783, 1e-4);
  EXPECT_DOUBLE_EQ(alerts[0].threshold, 0.25);
  EXPECT_EQ(alerts[0].target, "r0");
  ASSERT_TRUE(alerts[0].rank.has_value());
  EXPECT_EQ(alerts[1].rule, Rule::kDataWait);
  EXPECT_DOUBLE_EQ(alerts[1].value, 0.9102);
}

TEST(RuleEvaluatorTest, ConditionMustHoldForHoldFor) {
  Thresholds t;
  t.hold_for = seconds(120);
  RuleEvaluator rules(t);
  NodeView view;
  view.ranks.push_back(rank_view("r0", 0));
  view.ranks[0].record.data_wait_ratio = 0.5;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(rules.evaluate(view, t0).empty());
  EXPECT_TRUE(rules.evaluate(view, t0 + seconds(119)).empty());
  EXPECT_EQ(rules.evaluate(view, t0 + seconds(120)).size(), 1u);
  // Dropping below the threshold resets the clock.
  view.ranks[0].record.data_wait_ratio = 0.05;
  EXPECT_TRUE(rules.evaluate(view, t0 + seconds(121)).empty());
  view.ranks[0].record.data_wait_ratio = 0.5;
  EXPECT_TRUE(rules.evaluate(view, t0 + seconds(122)).empty());
}

TEST(RuleEvaluatorTest, RetriesPerMinuteCountOverTheWindow) {
  RuleEvaluator rules(immediate());  // 1 per minute over 300 s: more than 5 retries in 5 min
  NodeView view;
  view.ranks.push_back(rank_view("r0", 0));
  const auto t0 = std::chrono::steady_clock::now();
  view.ranks[0].record.alloc_retries = 2;
  EXPECT_TRUE(rules.evaluate(view, t0).empty());
  view.ranks[0].record.alloc_retries = 7;  // +5 in 60 s: exactly 1/min, not above
  EXPECT_TRUE(rules.evaluate(view, t0 + seconds(60)).empty());
  view.ranks[0].record.alloc_retries = 8;  // +6: 1.2/min
  auto alerts = rules.evaluate(view, t0 + seconds(120));
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].rule, Rule::kAllocRetries);
  EXPECT_DOUBLE_EQ(alerts[0].value, 1.2);
  // Ten minutes without a new retry: the early ones left the window.
  EXPECT_TRUE(rules.evaluate(view, t0 + seconds(720)).empty());
}

TEST(RuleEvaluatorTest, HbmUsesNvmlPerGpuAndTheRankViewWithoutIt) {
  RuleEvaluator rules(immediate());
  NodeView view;
  view.ranks.push_back(rank_view("r0", 0));
  view.ranks[0].record.reserved_bytes = 140'000'000'000;
  view.ranks[0].record.inactive_split_bytes = 0;
  // No NVML: the rank's own reserved / total (0.929).
  auto alerts = rules.evaluate(view, std::chrono::steady_clock::now());
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].rule, Rule::kHbmUsed);
  EXPECT_EQ(alerts[0].target, "r0");
  // NVML up: per GPU, from NVML's used bytes, whatever the ranks say.
  view.nvml.up = true;
  for (auto [index, used] : {std::pair{0u, 100'000'000'000ull}, std::pair{1u, 143'000'000'000ull}}) {
    GpuSample gpu;
    gpu.index = index;
    gpu.used_bytes = used;
    gpu.total_bytes = 150'754'820'096;
    view.nvml.gpus.push_back(gpu);
  }
  alerts = rules.evaluate(view, std::chrono::steady_clock::now());
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].target, "gpu1");
  EXPECT_EQ(alerts[0].gpu, 1);
  EXPECT_FALSE(alerts[0].rank.has_value());
  EXPECT_NEAR(alerts[0].value, 0.9486, 1e-4);
}

TEST(RuleEvaluatorTest, RuleNamesRoundTrip) {
  for (Rule rule : kAllRules) EXPECT_EQ(parse_rule(rule_name(rule)), rule);
  EXPECT_FALSE(parse_rule("oom").has_value());
}

}  // namespace
}  // namespace fragscope::agent

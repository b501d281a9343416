#include "plan/training_schedule.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "tape_probe.h"

namespace fragscope::plan {
namespace {

using testing::tiny_llama;

std::vector<std::uint64_t> read_all(const MicroStepLengths& lengths) {
  MicroStepLengths::Reader reader(lengths);
  std::vector<std::uint64_t> out;
  for (std::uint64_t k = 0; k < lengths.count(); ++k) out.push_back(reader.next());
  return out;
}

// `count` lengths drawn one by one from the spec's distribution with `seed`.
std::vector<std::uint64_t> draw_lengths(const JobSpec& spec, std::size_t count, std::uint64_t seed) {
  LengthDraws draws(length_distribution(spec), seed);
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back(draws.next());
  return out;
}

JobSpec variable_length_spec() {
  JobSpec s = tiny_llama();
  s.training.seq_len = 4096;
  s.training.variable_length = true;
  s.training.min_seq_len = 256;
  s.training.median_seq_len = 1097;
  return s;
}

TEST(TrainingSchedule, FixedLengthsRunThreeOptimizerSteps) {
  JobSpec s = tiny_llama();
  s.training.grad_accum = 4;
  const std::vector<TrainingSchedule> schedules = planning_schedules(s);
  ASSERT_EQ(schedules.size(), 1u);
  EXPECT_EQ(read_all(schedules[0].lengths), std::vector<std::uint64_t>(12, 64));
  EXPECT_EQ(schedules[0].lengths.longest(), 64u);
  EXPECT_TRUE(schedules[0].eval_after.empty());
  s.eval = EvalConfig{8, 128, 2};
  EXPECT_EQ(planning_schedules(s)[0].eval_after, (std::vector<std::uint32_t>{7, 11}));  // every 2 steps, and the last
}

TEST(TrainingSchedule, VariableLengthsAreSeededDrawsEndingOnTheLongest) {
  const JobSpec s = variable_length_spec();
  const std::vector<TrainingSchedule> draws = planning_schedules(s);
  ASSERT_EQ(draws.size(), kLengthDraws);
  EXPECT_EQ(read_all(draws[0].lengths), read_all(planning_schedules(s)[0].lengths));  // seeded: the same every time
  EXPECT_NE(read_all(draws[0].lengths), read_all(draws[1].lengths));
  for (const auto& a : draws) {
    const std::vector<std::uint64_t> lengths = read_all(a.lengths);
    EXPECT_EQ(lengths.size(), 128u);  // whole optimizer steps, at least 8
    EXPECT_EQ(lengths.back(), 4096u);
    EXPECT_EQ(a.lengths.longest(), 4096u);
    for (auto len : lengths) {
      EXPECT_GE(len, 256u);
      EXPECT_LE(len, 4096u);
      EXPECT_EQ(len % 8, 0u);
    }
  }
  // The recorder's distribution: median e^7 ≈ 1097, σ 0.6.
  std::vector<std::uint64_t> many = draw_lengths(s, 4001, 7);
  std::nth_element(many.begin(), many.begin() + 2000, many.end());
  EXPECT_NEAR(static_cast<double>(many[2000]), 1097.0, 40.0);
}

TEST(TrainingSchedule, DrawnLengthsAreReadAsDrawLengthsDrawsThem) {
  const JobSpec s = variable_length_spec();
  std::vector<std::uint64_t> expected = draw_lengths(s, 1000, kLengthSeed);
  expected.back() = s.training.seq_len;
  EXPECT_EQ(read_all(MicroStepLengths::drawn(s, 1000, kLengthSeed)), expected);
}

TEST(TrainingSchedule, AnOptimizerStepDrawsAtMostItsShareAndTakesThemAgain) {
  JobSpec s = variable_length_spec();
  s.training.grad_accum = 7;
  // up to the share every length is drawn, as LengthDraws draws them
  EXPECT_EQ(read_all(MicroStepLengths::drawn(s, 56, kLengthSeed, 7)),
            read_all(MicroStepLengths::drawn(s, 56, kLengthSeed)));
  EXPECT_EQ(MicroStepLengths::drawn(s, 56, kLengthSeed, 7).period(), 0u);
  // past it, the optimizer step's draws again, in order; the next step draws on
  const MicroStepLengths lengths = MicroStepLengths::drawn(s, 14, kLengthSeed, 3);
  EXPECT_EQ(lengths.period(), 3u);
  EXPECT_TRUE(lengths.last_is_forced());
  const std::vector<std::uint64_t> drawn = draw_lengths(s, 6, kLengthSeed), read = read_all(lengths);
  const std::vector<std::uint64_t> expected = {drawn[0], drawn[1], drawn[2], drawn[0], drawn[1], drawn[2], drawn[0],
                                               drawn[3], drawn[4], drawn[5], drawn[3], drawn[4], drawn[5], 4096};
  EXPECT_EQ(read, expected);
  // skipped lengths are the ones read would have given
  MicroStepLengths::Reader reader(lengths);
  for (int k = 0; k < 4; ++k) reader.next();
  reader.skip(2);
  EXPECT_EQ(reader.next(), drawn[0]);
  EXPECT_EQ(MicroStepLengths::repeated(64, 9).period(), 1u);
  EXPECT_EQ(MicroStepLengths::listed({64, 512, 8}).period(), 0u);
}

TEST(TrainingSchedule, AGradAccumAtItsLimitHoldsNoListOfLengths) {
  JobSpec s = variable_length_spec();
  s.training.grad_accum = 1u << 20;
  const std::vector<TrainingSchedule> draws = planning_schedules(s);
  EXPECT_EQ(draws[0].lengths.count(), 8ull << 20);  // 8 optimizer steps
  EXPECT_EQ(draws[0].lengths.longest(), 4096u);
  EXPECT_EQ(draws[0].eval_after.size(), 0u);
  EXPECT_EQ(MicroStepLengths::listed({64, 512, 8}).longest(), 512u);
  EXPECT_EQ(MicroStepLengths().count(), 0u);
}

}  // namespace
}  // namespace fragscope::plan

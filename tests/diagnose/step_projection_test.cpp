// The failing step's projected peak, on the recorded OOMs: the token ratio is the one the
// fixture's workload drew (meta.json says the failing step's seq_len; only the test reads it).
#include "diagnose/step_projection.h"

#include <gtest/gtest.h>

#include "../fixture_support.h"
#include "diagnose/oom_call_path.h"
#include "diagnose/recorded_curve.h"
#include "inputs/telemetry_reader.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::diagnose {
namespace {

using fragscope::testing::fixtures_dir;
using fragscope::testing::read_json;

struct Recorded {
  snapshot::Snapshot snapshot;
  std::vector<inputs::StepRecord> steps;
  nlohmann::json truth;
  nlohmann::json meta;
  RecordedCurve curve;
  std::size_t oom_index = 0;
};

Recorded load(const std::string& scenario) {
  Recorded r;
  const auto dir = fixtures_dir() / scenario;
  r.snapshot = snapshot::read_snapshot_file((dir / "snapshot.pickle.zst").string());
  r.steps = inputs::read_telemetry_file(dir / "steps.jsonl");
  r.truth = read_json(dir / "truth.json");
  r.meta = read_json(dir / "meta.json");
  r.curve = walk_recorded_curve(r.snapshot, 0);
  r.oom_index = r.truth["oom_event"]["index"].get<std::size_t>();
  return r;
}

std::uint64_t capacity_of(const Recorded& r) {
  return r.curve.reserved[r.oom_index] + r.truth["oom_event"]["device_free"].get<std::uint64_t>();
}

TEST(StepProjection, RecordTokensIsMicroBatchTimesSequence) {
  inputs::StepRecord record;
  record.seq_len = 3232;
  record.mbs = 4;
  EXPECT_EQ(record_tokens(record), 12928);
  record.tokens = 100;
  EXPECT_EQ(record_tokens(record), 100);
}

class ProjectionOnOom : public ::testing::TestWithParam<std::string> {};

TEST_P(ProjectionOnOom, FailingTokensMatchTheWorkloadsDraw) {
  const Recorded r = load(GetParam());
  const std::uint64_t request = r.truth["oom_event"]["size"].get<std::uint64_t>();
  const StepProjection p = project_failing_step(r.snapshot, 0, r.curve, r.oom_index, request, r.steps);
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  const std::int64_t expected_tokens =
      r.meta["oom_seq_len"].get<std::int64_t>() * r.meta["args"]["mbs"].get<std::int64_t>();
  ASSERT_TRUE(p.failing_tokens.has_value());
  EXPECT_NEAR(static_cast<double>(*p.failing_tokens), static_cast<double>(expected_tokens), 0.005 * expected_tokens);
  EXPECT_EQ(p.failing_step, r.meta["oom_step"].get<std::int64_t>());
  EXPECT_EQ(p.static_bytes,
            static_cast<std::uint64_t>(r.steps.back().memory_stat("allocated_bytes.all.current").value()));
  EXPECT_GE(p.projected_peak_bytes, p.live_at_oom_bytes);
  // The same step on an unlimited card peaks at eval_spike's step 1 (same workload and seed).
  const auto calib = inputs::read_telemetry_file(fixtures_dir() / "eval_spike" / "steps.jsonl");
  const double real_peak = static_cast<double>(calib.at(1).memory_stat("allocated_bytes.all.peak").value());
  EXPECT_NEAR(static_cast<double>(p.projected_peak_bytes), real_peak, 0.03 * real_peak);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ProjectionOnOom, ::testing::Values("frag_oom_104", "capacity_oom"));

TEST(StepProjection, CapacityOomNeedsMoreThanItHasAndFragOomFits) {
  const Recorded capacity = load("capacity_oom");
  const Recorded frag = load("frag_oom_104");
  const auto project = [](const Recorded& r) {
    return project_failing_step(r.snapshot, 0, r.curve, r.oom_index, r.truth["oom_event"]["size"].get<std::uint64_t>(),
                                r.steps);
  };
  EXPECT_GT(project(capacity).projected_peak_bytes, capacity_of(capacity));
  EXPECT_LT(project(frag).projected_peak_bytes, capacity_of(frag));
}

TEST(StepProjection, WithoutTelemetryItSaysWhy) {
  const Recorded r = load("frag_oom_104");
  const StepProjection p = project_failing_step(r.snapshot, 0, r.curve, r.oom_index, 1, {});
  EXPECT_FALSE(p.available);
  EXPECT_FALSE(p.unavailable_reason.empty());
}

TEST(OomCallPath, TrainingOomsRepeatTheStepAndTheEvalOomDoesNot) {
  for (const char* scenario : {"frag_oom_104", "capacity_oom"}) {
    const Recorded r = load(scenario);
    const OomCallPath path = analyze_oom_call_path(r.snapshot, 0, r.oom_index);
    ASSERT_TRUE(path.has_stack);
    EXPECT_TRUE(path.repeated) << scenario;
    EXPECT_TRUE(path.loop_repeats) << scenario;
    EXPECT_GE(path.episodes, 2u);
  }
  const Recorded eval = load("eval_spike");
  const OomCallPath path = analyze_oom_call_path(eval.snapshot, 0, eval.oom_index);
  ASSERT_TRUE(path.has_stack);
  EXPECT_FALSE(path.repeated);
  EXPECT_TRUE(path.loop_repeats);  // the training steps before it did repeat
  EXPECT_TRUE(path.model_forward);
  EXPECT_FALSE(path.optimizer);
  ASSERT_TRUE(path.statement_first_seen.has_value());
  EXPECT_LT(*path.statement_first_seen, eval.oom_index);
  EXPECT_GT(*path.statement_first_seen, eval.oom_index - 5000);  // the eval pass is new at the end
}

}  // namespace
}  // namespace fragscope::diagnose

// How much larger a batch may be than the failing one before its step needs more than the
// device, on field fs2_edge (FSDP2 from mid-run; the failing step 4 is ×1.2 the step before it).
#include "diagnose/batch_headroom.h"

#include <gtest/gtest.h>

#include "diagnose/recorded_curve.h"
#include "diagnose/trace_units.h"
#include "field_recordings.h"
#include "replay/prepared_trace.h"

namespace fragscope::diagnose {
namespace {

struct Projected {
  snapshot::Snapshot snap = fragscope::testing::read_field_snapshot("fs2_edge");
  ProjectedStep step;
  Projected() {
    const std::size_t oom = fragscope::testing::last_oom(snap);
    const replay::PreparedTrace prepared = replay::prepare_trace(snap, 0, "fs2_edge");
    const TraceUnits units = find_trace_units(snap, 0, oom);
    step = project_step_from_trace(prepared, snap, 0, walk_recorded_curve(snap, 0), oom, units);
  }
};

// The rerun of fs2_edge under expandable segments reached 24291063808 bytes allocated in the
// failing step (and passed it); the whole-reference projection's own peak comes within 1% of it.
TEST(BatchHeadroom, TheGrowthModelStartsAtTheProjectedPeak) {
  const Projected p;
  ASSERT_TRUE(p.step.figures.available);
  ASSERT_TRUE(p.step.peak_at_factor);
  EXPECT_NEAR(static_cast<double>(p.step.peak_at_factor(1.0)), 24291063808.0, 0.01 * 24291063808.0);
  EXPECT_GT(p.step.peak_at_factor(1.1), p.step.peak_at_factor(1.0));
}

TEST(BatchHeadroom, TheFactorIsTheLeastThatExceedsTheLimit) {
  Projected p;
  p.step.figures.projected_peak_bytes = p.step.peak_at_factor(1.0);
  const auto peak = static_cast<double>(p.step.figures.projected_peak_bytes);
  const auto limit = static_cast<std::uint64_t>(1.02 * peak);
  const auto factor = exceeding_batch_factor(p.step, limit);
  ASSERT_TRUE(factor.has_value());
  EXPECT_GT(p.step.peak_at_factor(*factor), limit);
  EXPECT_LE(p.step.peak_at_factor(*factor / 1.002), limit);
  // Activations are about two thirds of the peak (the rest: weights, gradients, optimizer state).
  EXPECT_GT(*factor, 1.02);
  EXPECT_LT(*factor, 1.06);
  const auto further = exceeding_batch_factor(p.step, static_cast<std::uint64_t>(1.1 * peak));
  ASSERT_TRUE(further.has_value());
  EXPECT_GT(*further, *factor);
}

TEST(BatchHeadroom, NoFactorBelowThePeakOrBeyondFourTimesTheBatch) {
  Projected p;
  p.step.figures.projected_peak_bytes = p.step.peak_at_factor(1.0);
  EXPECT_FALSE(exceeding_batch_factor(p.step, p.step.figures.projected_peak_bytes - 1).has_value());
  EXPECT_FALSE(exceeding_batch_factor(p.step, 10 * p.step.figures.projected_peak_bytes).has_value());
  ProjectedStep none;
  EXPECT_FALSE(exceeding_batch_factor(none, 1ull << 40).has_value());
}

}  // namespace
}  // namespace fragscope::diagnose

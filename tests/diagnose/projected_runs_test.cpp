// The projected step replayed at the capacity, on field fs2_edge (FSDP2 from mid-run; the
// failing step projected from the one before it).
#include "diagnose/projected_runs.h"

#include <gtest/gtest.h>

#include "diagnose/recorded_curve.h"
#include "diagnose/trace_units.h"
#include "field_recordings.h"
#include "replay/prepared_trace.h"

namespace fragscope::diagnose {
namespace {

// An unchecked projection whose doubts exceed the capacity asks a setting to run the step with
// more than the whole capacity to spare (held-out A_mid with its trace's first half dropped:
// 122%). The device scaled by 1 − that margin was a negative byte count, converted to an
// unsigned one: the setting "ran" it, and the verdict named the next step (0 bytes more) where
// the projection was too close to decide. Nothing runs with such a margin.
TEST(ProjectedRuns, AMarginOfTheWholeCapacityOrMoreRunsNothing) {
  const snapshot::Snapshot snap = fragscope::testing::read_field_snapshot("fs2_edge");
  const std::size_t oom = fragscope::testing::last_oom(snap);
  const replay::PreparedTrace prepared = replay::prepare_trace(snap, 0, "fs2_edge");
  const TraceUnits units = find_trace_units(snap, 0, oom);
  const replay::Capacity capacity = replay::resolve_capacity(prepared, {});
  const std::vector<replay::WhatIfConfig> configs = replay::standard_sweep(prepared, false);
  for (const double margin : {0.001, 1.22}) {
    ProjectedStep step = project_step_from_trace(prepared, snap, 0, walk_recorded_curve(snap, 0), oom, units);
    ASSERT_TRUE(step.figures.available);
    step.figures.margin_to_fit = margin;
    step.figures.margin_to_fail = margin;
    replay_projected_step(step, configs, capacity, 2);
    bool any_runs = false, any_with_margin = false;
    for (const ProjectedRun& run : step.figures.runs) {
      any_runs |= run.runs;
      any_with_margin |= run.runs_with_margin;
    }
    EXPECT_TRUE(any_runs) << margin;  // the step fits (its rerun passed it): expandable segments run it
    EXPECT_EQ(any_with_margin, margin < 1) << margin;
  }
}

}  // namespace
}  // namespace fragscope::diagnose

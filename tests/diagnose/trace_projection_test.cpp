// The failing step projected from the trace alone (no step telemetry), on field recordings of
// third-party training code. Each job was also run without a budget (the calibration run of
// validation/field/batch*.sh); where the failing step is that run's highest, its
// max_memory_allocated is the step's real peak, and the projection must come within 1% of it.
#include "diagnose/trace_projection.h"

#include <gtest/gtest.h>

#include "../fixture_support.h"
#include "diagnose/doctor.h"
#include "diagnose/recorded_curve.h"
#include "field_recordings.h"
#include "replay/prepared_trace.h"

namespace fragscope::diagnose {
namespace {

using fragscope::testing::field_user_files;
using fragscope::testing::last_oom;
using fragscope::testing::read_field_snapshot;

Diagnosis diagnose(const std::string& name) {
  DoctorOptions options;
  options.threads = 2;
  return run_doctor(collect_doctor_inputs(field_user_files(name)), options);
}

struct Calibrated {
  std::string name;
  std::uint64_t real_peak;  ///< max_memory_allocated of the job's calibration run
};

class ProjectedFromTheTrace : public ::testing::TestWithParam<Calibrated> {};

TEST_P(ProjectedFromTheTrace, ComesWithinOnePercentOfTheCalibrationRunsPeak) {
  const Diagnosis d = diagnose(GetParam().name);
  const TraceStepProjection& p = d.trace_projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  const auto real = static_cast<double>(GetParam().real_peak);
  EXPECT_NEAR(static_cast<double>(p.projected_peak_bytes), real, 0.01 * real);
  ASSERT_TRUE(p.fit_error.has_value());
  EXPECT_LT(*p.fit_error, 0.01);  // the fit checked on the trace's own earlier steps
  EXPECT_GE(p.checked_units, 1u);
  EXPECT_EQ(p.matched_allocations, p.prefix_allocations);
  EXPECT_FALSE(d.projection.available);  // no telemetry: the old projection has nothing to go on
}

INSTANTIATE_TEST_SUITE_P(Field, ProjectedFromTheTrace,
                         ::testing::Values(Calibrated{"acc_edge", 33298181120}, Calibrated{"ec_edge", 16933442560},
                                           Calibrated{"ec_lo", 16933442560}, Calibrated{"fsdp_edge", 36095979520},
                                           Calibrated{"lit_edge", 26560292352}, Calibrated{"seg_edge", 7810435072},
                                           Calibrated{"tut_edge", 43540715520}),
                         [](const auto& info) { return info.param.name; });

// ec_lo's failing step is the longest batch of the job: its calibration run peaked at 16.93 GB
// there, more live bytes than the 15.49 GB the process could hold. No allocator holds more.
TEST(ProjectedFromTheTrace, AStepThatNeedsMoreThanTheDeviceIsCapacity) {
  const Diagnosis d = diagnose("ec_lo");
  EXPECT_EQ(d.verdict, Verdict::kCapacity);
  ASSERT_TRUE(d.capacity_bytes.has_value());
  EXPECT_GT(d.trace_projection.projected_peak_bytes, *d.capacity_bytes);
  EXPECT_TRUE(d.recommended_conf.empty());
  for (const Action& a : d.actions) EXPECT_EQ(a.setting.find("PYTORCH_CUDA_ALLOC_CONF"), std::string::npos) << a.title;
}

// HF Trainer's step 0 padded its batch to 2048 tokens, the longest the job makes; step 2 failed
// at 1957. A step of 2048 tokens begun as step 2 began (the optimizer's state held) is what the
// calibration run peaked at, 26084083712 bytes.
TEST(ProjectedFromTheTrace, TheLongestBatchSeenIsProjectedInTheFailingStepsState) {
  const Diagnosis d = diagnose("hft_edge");
  const TraceStepProjection& p = d.trace_projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  ASSERT_TRUE(p.longest_unit.has_value());
  EXPECT_EQ(*p.longest_unit, 1u);
  EXPECT_NEAR(static_cast<double>(p.longest_peak_bytes), 26084083712.0, 0.01 * 26084083712.0);
  EXPECT_GT(p.longest_peak_bytes, p.projected_peak_bytes);
}

// The reference unit's rest, synthesised after the failing malloc: the recorded operations up to
// it are kept (the failing malloc now served) and the recorded OOM entry is gone.
TEST(ProjectedFromTheTrace, SynthesisedTraceKeepsTheRecordedPrefix) {
  const snapshot::Snapshot snap = read_field_snapshot("hft_edge");
  const std::size_t oom = last_oom(snap);
  const replay::PreparedTrace prepared = replay::prepare_trace(snap, 0, "hft_edge");
  const ProjectedStep step =
      project_step_from_trace(prepared, snap, 0, walk_recorded_curve(snap, 0), oom, find_trace_units(snap, 0, oom));
  ASSERT_TRUE(step.figures.available) << step.figures.unavailable_reason;
  EXPECT_EQ(step.figures.reference_unit, 2u);
  EXPECT_NEAR(step.figures.scale, 1957.0 / 1055.0, 0.002);  // the two batches' padded lengths (input_ids' sizes)
  EXPECT_TRUE(step.trace.ooms.empty());
  ASSERT_LT(step.projected_from_op, step.trace.ops.size());
  EXPECT_EQ(step.trace.ops[step.projected_from_op].kind, replay::OpKind::kAlloc);
  EXPECT_EQ(step.trace.ops[step.projected_from_op].size, snap.trace(0)[oom].size);
  for (std::size_t k = 0; k < step.projected_from_op; ++k) {
    ASSERT_NE(step.trace.ops[k].kind, replay::OpKind::kOom);
    EXPECT_EQ(step.trace.ops[k].trace_index, prepared.ops[k].trace_index);
  }
  EXPECT_GT(step.trace.ops.size(), step.projected_from_op + 1000);  // the rest of the step: its backward and optimizer
}

}  // namespace
}  // namespace fragscope::diagnose

// The doctor on recordings of a shape no fixture has (hidden 1792, 14 layers, seed 2027), made
// on the H200 after the doctor was written (docs/VALIDATION.md, "Held-out doctor check"). Each
// OOM label was established by experiment, as the fixtures' are: the same run and budget again
// under expandable_segments:True; completed → fragmentation, OOM again → capacity (label.json,
// with the rerun's figures).
#include "diagnose/doctor.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "../fixture_support.h"
#include "diagnose/oom_call_path.h"
#include "diagnose/recorded_curve.h"
#include "diagnose/step_projection.h"
#include "doctor_fixture_files.h"
#include "inputs/telemetry_reader.h"
#include "snapshot/snapshot_reader.h"
#include "../doctor_options.h"

namespace fragscope::diagnose {
namespace {

using fragscope::testing::doctor_user_files_in;
using fragscope::testing::read_json;

std::filesystem::path heldout_dir(const std::string& name) {
  return std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "tests" / "data" / "heldout" / name;
}

Diagnosis diagnose(const std::string& name) {
  const DoctorInputs inputs = collect_doctor_inputs(doctor_user_files_in(heldout_dir(name), "heldout-" + name));
  EXPECT_TRUE(inputs.unrecognised.empty());
  DoctorOptions options = fragscope::testing::doctor_options();
  options.threads = 2;
  return run_doctor(inputs, options);
}

/// The same recording without steps.jsonl: the snapshot and the log only.
Diagnosis diagnose_without_telemetry(const std::string& name) {
  std::vector<std::string> files = doctor_user_files_in(heldout_dir(name), "heldout-" + name);
  std::erase_if(files, [](const std::string& f) { return f.ends_with("steps.jsonl"); });
  DoctorOptions options = fragscope::testing::doctor_options();
  options.threads = 2;
  return run_doctor(collect_doctor_inputs(files), options);
}

class DoctorHeldOut : public ::testing::TestWithParam<std::string> {};

TEST_P(DoctorHeldOut, VerdictMatchesTheRerunsLabel) {
  const std::string name = GetParam();
  const auto label = read_json(heldout_dir(name) / "label.json");
  const Diagnosis d = diagnose(name);
  const std::string verdict(to_string(d.verdict));
  if (label.contains("accept")) {  // an OOM in a pass the recorded steps never ran
    const auto accepted = label["accept"].get<std::vector<std::string>>();
    EXPECT_NE(std::find(accepted.begin(), accepted.end(), verdict), accepted.end()) << name << ": " << d.headline;
    EXPECT_EQ(d.phase, label["doctor_phase"].get<std::string>());
    if (verdict == "undetermined") {
      EXPECT_FALSE(d.decide_with.empty());
    }
  } else if (label["oom_phase"] == "eval") {
    EXPECT_EQ(verdict, label["label"].get<std::string>()) << name << ": " << d.headline;
    EXPECT_EQ(d.phase, "eval");
  } else {
    EXPECT_EQ(verdict, label["label"].get<std::string>()) << name << ": " << d.headline;
    if (d.oom) {
      EXPECT_EQ(d.phase, label.value("doctor_phase", std::string("train")));
    }
  }
  EXPECT_EQ(d.oom, label["outcome"] == "oom");
  if (label["data_wait_fraction"].is_number()) {
    ASSERT_TRUE(d.data_wait_fraction.has_value());
    EXPECT_NEAR(*d.data_wait_fraction, label["data_wait_fraction"].get<double>(), 0.01);
  }
}

INSTANTIATE_TEST_SUITE_P(Recordings, DoctorHeldOut,
                         ::testing::Values("frag", "cap", "eval", "input", "B_frag", "B_cap", "C_frag", "A_frac",
                                           "A_mid", "D_frag", "E_1.02", "E_1.06", "E_eval", "S_exp_round2", "F7_frag"));

// Without the telemetry the step is projected from the trace alone (trace_projection.h): never
// a wrong verdict; undetermined where the projection cannot tell (F7_frag fails in the first
// micro-step after an optimizer step: the next one holds the gradients again, and whether its
// batch is as long is not in the trace).
class WithoutTelemetry : public ::testing::TestWithParam<std::string> {};

TEST_P(WithoutTelemetry, VerdictIsTheLabelOrUndetermined) {
  const std::string name = GetParam();
  const auto label = read_json(heldout_dir(name) / "label.json");
  const Diagnosis d = diagnose_without_telemetry(name);
  const std::string verdict(to_string(d.verdict));
  const std::string expected = label["label"].get<std::string>();
  if (expected == "input_bound") {
    // nvidia-smi shows the GPU idle, and nothing without the telemetry tells whether it waited for data.
    EXPECT_EQ(verdict, "undetermined") << d.headline;
    EXPECT_FALSE(d.decide_with.empty());
    return;
  }
  EXPECT_TRUE(verdict == expected || verdict == "undetermined") << name << ": " << verdict << " — " << d.headline;
  if (verdict == "undetermined") {
    EXPECT_FALSE(d.decide_with.empty());
  }
  if (verdict != "fragmentation") {
    EXPECT_TRUE(d.recommended_conf.empty()) << d.recommended_conf;
  }
}

INSTANTIATE_TEST_SUITE_P(Recordings, WithoutTelemetry,
                         ::testing::Values("frag", "cap", "eval", "input", "B_frag", "B_cap", "C_frag", "A_frac",
                                           "A_mid", "D_frag", "E_1.02", "E_1.06", "E_eval", "S_exp_round2", "F7_frag"));

// These the trace alone decides. B_frag has one micro-step per optimizer step and only Python
// stacks: its backward pass's allocations have no frames and are aligned by size. S_exp_round2
// was recorded under roundup_power2_divisions: its sizes are rounded up, and it is decided by a
// setting that runs the rounded step with margin, not by its inflated peak.
class DecidedWithoutTelemetry : public ::testing::TestWithParam<std::string> {};

TEST_P(DecidedWithoutTelemetry, VerdictIsTheLabel) {
  const std::string name = GetParam();
  const auto label = read_json(heldout_dir(name) / "label.json");
  const Diagnosis d = diagnose_without_telemetry(name);
  EXPECT_EQ(std::string(to_string(d.verdict)), label["label"].get<std::string>()) << d.headline;
  ASSERT_TRUE(d.trace_projection.available) << d.trace_projection.unavailable_reason;
  EXPECT_FALSE(d.recommended_conf.empty());
}

INSTANTIATE_TEST_SUITE_P(Recordings, DecidedWithoutTelemetry,
                         ::testing::Values("frag", "B_frag", "C_frag", "A_frac", "S_exp_round2", "E_1.06"));

// E_1.02: the step projects to 26.91 GiB of 27.21, a fit checked on 7 units of its kind to 0.0%. No setting
// runs it even 0.1% above the capacity (expandable segments need 370 MiB above live): capacity, its label,
// from the trace alone and, with the telemetry (whose projection is within its 2% of the capacity), from
// the trace's projection too. A checked fit keeps its own error, at least 0.1%, on both sides.
TEST(DecidedWithoutTelemetry, ACheckedFitThatNoSettingRunsIsCapacity) {
  for (const Diagnosis& d : {diagnose_without_telemetry("E_1.02"), diagnose("E_1.02")}) {
    EXPECT_EQ(d.verdict, Verdict::kCapacity) << d.headline;
    ASSERT_TRUE(d.trace_projection.available);
    EXPECT_GE(d.trace_projection.checked_units, 3u);
    EXPECT_DOUBLE_EQ(d.trace_projection.margin_to_fail, 0.001);
    EXPECT_DOUBLE_EQ(d.trace_projection.margin_to_fit, 0.001);
    EXPECT_TRUE(d.recommended_conf.empty());
  }
  const Diagnosis with = diagnose("E_1.02");
  EXPECT_TRUE(std::any_of(with.evidence.begin(), with.evidence.end(), [](const Evidence& e) {
    return e.key == "too_close" && e.text.find("the trace's own projection below decides") != std::string::npos;
  }));
}

// E_1.06 accumulates gradients over micro-steps: units that begin without gradients, or before
// the optimizer made its state, are of other kinds. Its fit once counted them and missed one
// by 4.1% (the first micro-step after the first optimizer step); checked on the 7 units of the
// failing unit's kind it is exact, and so is the projection (the rerun's failing step peaked
// at 28889488384 bytes): expandable segments run it with the 0.1% floor to spare.
TEST(DecidedWithoutTelemetry, TheFitIsCheckedOnUnitsOfTheFailingUnitsKind) {
  const Diagnosis d = diagnose_without_telemetry("E_1.06");
  const TraceStepProjection& p = d.trace_projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  EXPECT_EQ(p.checked_units, 7u);
  EXPECT_GT(p.other_kind_units, 0u);
  ASSERT_TRUE(p.fit_error.has_value());
  EXPECT_LT(*p.fit_error, 1e-6);
  EXPECT_DOUBLE_EQ(p.fit_margin, 0.005);
  EXPECT_EQ(d.verdict, Verdict::kFragmentation);
}

// Projected from the trace, the failing step's peak against the rerun's (within 2%, as the
// telemetry's projection is held to); A_frac's and S_exp_round2's reruns recorded no per-step peak.
class ProjectedWithoutTelemetry : public ::testing::TestWithParam<std::string> {};

TEST_P(ProjectedWithoutTelemetry, PeakIsTheRerunsPeak) {
  const std::string name = GetParam();
  const auto label = read_json(heldout_dir(name) / "label.json");
  const double real_peak = label["rerun"]["failing_step_record"]["allocated_bytes.all.peak"].get<double>();
  const Diagnosis d = diagnose_without_telemetry(name);
  ASSERT_TRUE(d.trace_projection.available) << d.trace_projection.unavailable_reason;
  EXPECT_NEAR(static_cast<double>(d.trace_projection.projected_peak_bytes), real_peak, 0.02 * real_peak);
}

// F7_frag fails in the first micro-step after an optimizer step (gradient accumulation 4): the
// step itself runs under expandable segments, but the next micro-steps hold the gradients again,
// and one as long would not fit. Its rerun completed: the later batches were shorter, which the
// trace cannot show. Undetermined, and the first thing named to decide it is those lengths.
TEST(WithoutTelemetry, AFirstMicroStepNamesTheBatchesStillToCome) {
  const Diagnosis d = diagnose_without_telemetry("F7_frag");
  EXPECT_EQ(d.verdict, Verdict::kUndetermined);
  EXPECT_TRUE(
      std::any_of(d.evidence.begin(), d.evidence.end(), [](const Evidence& e) { return e.key == "next_step"; }));
  ASSERT_FALSE(d.decide_with.empty());
  EXPECT_NE(d.decide_with.front().find("gradients are held"), std::string::npos) << d.decide_with.front();
  EXPECT_NE(d.decide_with.front().find("expandable_segments:True"), std::string::npos) << d.decide_with.front();
}

INSTANTIATE_TEST_SUITE_P(Recordings, ProjectedWithoutTelemetry,
                         ::testing::Values("frag", "B_frag", "C_frag", "E_1.06"));

// An eval pass that fails in `logits.float()`, after the model's forward: the failing malloc's
// stack has no module frame, its episode has. It ran once and longer than three training
// steps, which made it look like a statement wrapping the training loop; it ran no optimizer,
// so it does not wrap one (before the fix: phase "train", then "unknown").
class EvalPass : public ::testing::TestWithParam<std::string> {};

TEST_P(EvalPass, IsAPassTheStepsNeverRanNotAWrapper) {
  const auto dir = heldout_dir(GetParam());
  const snapshot::Snapshot snap = snapshot::read_snapshot_file((dir / "snapshot.pickle.gz").string());
  const auto steps = inputs::read_telemetry_file(dir / "steps.jsonl");
  std::vector<double> step_ms;
  for (const auto& r : steps) step_ms.push_back(r.step_time_or_sum_ms());
  std::sort(step_ms.begin(), step_ms.end());
  const double median_ms = step_ms[step_ms.size() / 2];
  const auto trace = snap.trace(0);
  std::size_t oom = 0;
  while (trace[oom].action != snapshot::TraceAction::kOom) ++oom;
  const OomCallPath path = analyze_oom_call_path(snap, 0, oom, median_ms);
  EXPECT_EQ(path.episodes, 1u);
  EXPECT_GT(path.statement_span_ms, kWrapperSteps * median_ms);  // as long as a wrapper
  EXPECT_TRUE(path.episode_forward);
  EXPECT_FALSE(path.episode_optimizer);
  EXPECT_FALSE(path.repeated);
  EXPECT_EQ(diagnose(GetParam()).phase, "eval");
}

INSTANTIATE_TEST_SUITE_P(Recordings, EvalPass, ::testing::Values("eval", "E_eval"));

// `eval` fails in layer 6 of 14 of its first eval pass (its rerun under expandable segments
// failed again). Projected from the training's model call, whose allocations its prefix
// matches frame for frame, the rest of the layers, the head and the loss need far more than the
// capacity even with every block whose lifetime the eval has not shown freed at once: capacity,
// with or without steps.jsonl (before: undetermined, "an eval pass the trace never ran").
TEST(EvalPass, AFirstEvalPassIsDecidedFromTheTrainingsModelCall) {
  for (const Diagnosis& d : {diagnose("eval"), diagnose_without_telemetry("eval")}) {
    EXPECT_EQ(d.verdict, Verdict::kCapacity) << d.headline;
    EXPECT_EQ(d.phase, "eval");
    const TraceStepProjection& p = d.trace_projection;
    ASSERT_TRUE(p.available) << p.unavailable_reason;
    EXPECT_TRUE(p.from_training_call);
    EXPECT_EQ(p.shared_function, "module.py in _wrapped_call_impl");
    EXPECT_EQ(p.matched_allocations, p.prefix_allocations);
    ASSERT_TRUE(d.capacity_bytes.has_value());
    EXPECT_GT(static_cast<double>(p.least_peak_bytes), 1.5 * static_cast<double>(*d.capacity_bytes));
    EXPECT_TRUE(d.recommended_conf.empty());
  }
}

// Projected peaks against the real ones: each rerun under expandable segments passed the step
// that failed and set its run's peak there (its `allocated_bytes.all.peak` rose at that step).
// B_frag runs one micro-step per optimizer step, so AdamW's temporaries top every step: the
// reference must be the highest forward/backward, not the optimizer. C_frag checkpoints
// activations (its backward recomputes them, hovering around the step's starting level).
class ProjectedPeak : public ::testing::TestWithParam<std::string> {};

TEST_P(ProjectedPeak, IsWithinTwoPercentOfTheRerunsPeak) {
  const std::string name = GetParam();
  const auto label = read_json(heldout_dir(name) / "label.json");
  const Diagnosis d = diagnose(name);
  ASSERT_TRUE(d.projection.available) << d.projection.unavailable_reason;
  const auto& rerun_step = label["rerun"]["failing_step_record"];
  EXPECT_EQ(d.projection.failing_step, rerun_step["step"].get<std::int64_t>());
  EXPECT_EQ(d.projection.failing_tokens,
            rerun_step["seq_len"].get<std::int64_t>() * rerun_step["mbs"].get<std::int64_t>());
  const double real_peak = rerun_step["allocated_bytes.all.peak"].get<double>();
  EXPECT_NEAR(static_cast<double>(d.projection.projected_peak_bytes), real_peak, 0.02 * real_peak);
}

INSTANTIATE_TEST_SUITE_P(Recordings, ProjectedPeak,
                         ::testing::Values("frag", "cap", "B_frag", "C_frag", "E_1.06", "F7_frag"));

// Where the failing statement does not tell the steps apart (one episode wraps the loop), the
// projection finds them from the allocated curve alone; on these recordings both agree. Not on
// C_frag: a checkpointed backward pass recomputes activations and climbs well above the step's
// starting level several times, so the curve shows more steps than ran (docs/doctor.md).
class ProjectedPeakFromCurve : public ::testing::TestWithParam<std::string> {};

TEST_P(ProjectedPeakFromCurve, AgreesWithTheStatementsEpisodes) {
  const std::string name = GetParam();
  const auto dir = heldout_dir(name);
  const auto label = read_json(dir / "label.json");
  const snapshot::Snapshot snap = snapshot::read_snapshot_file((dir / "snapshot.pickle.gz").string());
  const auto steps = inputs::read_telemetry_file(dir / "steps.jsonl");
  const RecordedCurve curve = walk_recorded_curve(snap, 0);
  const auto trace = snap.trace(0);
  std::size_t oom = 0;
  while (trace[oom].action != snapshot::TraceAction::kOom) ++oom;
  const OomCallPath path = analyze_oom_call_path(snap, 0, oom);
  ASSERT_GE(path.episode_starts.size(), 2u);
  const StepProjection by_episodes =
      project_failing_step(snap, 0, curve, oom, trace[oom].size, steps, path.episode_starts);
  const StepProjection by_curve = project_failing_step(snap, 0, curve, oom, trace[oom].size, steps);
  ASSERT_TRUE(by_curve.available) << by_curve.unavailable_reason;
  EXPECT_EQ(by_curve.reference_step, by_episodes.reference_step);
  EXPECT_NEAR(static_cast<double>(by_curve.projected_peak_bytes), static_cast<double>(by_episodes.projected_peak_bytes),
              0.01 * static_cast<double>(by_episodes.projected_peak_bytes));
}

INSTANTIATE_TEST_SUITE_P(Recordings, ProjectedPeakFromCurve, ::testing::Values("frag", "cap", "B_frag"));

// `cap` fails in step 4, the first micro-step after the optimizer step. The trace's highest point
// is that optimizer step (AdamW's foreach temporaries), which the forward pass never calls: the
// reference must be step 3's forward and backward, not the optimizer (before the fix the doctor
// took the failing pass for an eval pass). Step 4 itself fits under expandable segments (the
// rerun passed it, peaking at its `allocated_bytes.all.peak`), but it runs without the
// gradients zero_grad dropped; step 5 holds them again and fails (the rerun died there).
TEST(DoctorHeldOut, FirstStepAfterTheOptimizerIsProjectedFromTheTrainingPass) {
  const auto label = read_json(heldout_dir("cap") / "label.json");
  const auto& rerun_step = label["rerun"]["failing_step_record"];
  const Diagnosis d = diagnose("cap");
  const StepProjection& p = d.projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  EXPECT_EQ(p.failing_step, 4);
  EXPECT_EQ(p.reference_step, 3);
  EXPECT_EQ(p.token_ratio, 4992.0 / 2944.0);
  const double real_peak = rerun_step["allocated_bytes.all.peak"].get<double>();
  EXPECT_NEAR(static_cast<double>(p.projected_peak_bytes), real_peak, 0.02 * real_peak);
  ASSERT_TRUE(d.capacity_bytes.has_value());
  EXPECT_LE(p.projected_peak_bytes, *d.capacity_bytes);
  // The gradients step 4 makes and keeps: its end level in the rerun less its start level.
  const double gradients =
      rerun_step["allocated_bytes.all.current"].get<double>() - static_cast<double>(p.static_bytes);
  EXPECT_NEAR(static_cast<double>(p.returning_bytes), gradients, 0.05 * gradients);
  EXPECT_GT(p.next_step_peak_bytes, *d.capacity_bytes);
  EXPECT_EQ(d.verdict, Verdict::kCapacity);
}

// `frag` fails in step 9, the longest batch so far; the rerun under expandable segments passed it
// and set its run's peak there (its record's `allocated_bytes.all.peak` rose at step 9).
TEST(DoctorHeldOut, FragmentedStepIsProjectedToItsRealPeak) {
  const auto label = read_json(heldout_dir("frag") / "label.json");
  const Diagnosis d = diagnose("frag");
  const StepProjection& p = d.projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  EXPECT_EQ(p.failing_step, 9);
  const double real_peak = label["rerun"]["failing_step_record"]["allocated_bytes.all.peak"].get<double>();
  EXPECT_NEAR(static_cast<double>(p.projected_peak_bytes), real_peak, 0.02 * real_peak);
  // Step 8 made the gradients again before step 9 began: what returns is a few small blocks.
  EXPECT_LT(p.returning_bytes, p.static_bytes / 100);
  ASSERT_TRUE(d.capacity_bytes.has_value());
  EXPECT_LE(p.next_step_peak_bytes, *d.capacity_bytes);
}

}  // namespace
}  // namespace fragscope::diagnose

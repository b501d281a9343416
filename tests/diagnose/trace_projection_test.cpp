// The failing step projected from the trace alone (no step telemetry), on field recordings of
// third-party training code. Each job was also run without a budget (the calibration run of
// validation/field/batch*.sh); where the failing step is that run's highest, its
// max_memory_allocated is the step's real peak, and the projection must come within 1% of it.
#include "diagnose/trace_projection.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <set>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "../fixture_support.h"
#include "diagnose/doctor.h"
#include "diagnose/recorded_curve.h"
#include "diagnose/optimizer_code.h"
#include "diagnose/python_frames.h"
#include "diagnose/trace_units.h"
#include "field_recordings.h"
#include "replay/prepared_trace.h"
#include "snapshot/snapshot_reader.h"
#include "../doctor_options.h"

namespace fragscope::diagnose {
namespace {

using fragscope::testing::field_user_files;
using fragscope::testing::last_oom;
using fragscope::testing::read_field_snapshot;

Diagnosis diagnose(const std::string& name) {
  DoctorOptions options = fragscope::testing::doctor_options();
  options.threads = 2;
  return run_doctor(collect_doctor_inputs(field_user_files(name)), options);
}

struct Calibrated {
  std::string name;
  std::uint64_t real_peak;  ///< max_memory_allocated of the job's calibration run
};

/// How gtest shows a row in its output: the recording, not the struct's bytes.
void PrintTo(const Calibrated& c, std::ostream* os) { *os << c.name; }

class ProjectedFromTheTrace : public ::testing::TestWithParam<Calibrated> {};

TEST_P(ProjectedFromTheTrace, ComesWithinOnePercentOfTheCalibrationRunsPeak) {
  const Diagnosis d = diagnose(GetParam().name);
  const TraceStepProjection& p = d.trace_projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  const auto real = static_cast<double>(GetParam().real_peak);
  EXPECT_NEAR(static_cast<double>(p.projected_peak_bytes), real, 0.01 * real);
  ASSERT_TRUE(p.fit_error.has_value());
  EXPECT_LT(*p.fit_error, 0.01);  // the fit checked on the trace's own earlier steps
  EXPECT_LT(p.prefix_misfit_share, 0.05);  // and on the failing step's own allocations so far
  EXPECT_GE(p.checked_units, 1u);
  EXPECT_EQ(p.matched_allocations, p.prefix_allocations);
  EXPECT_FALSE(d.projection.available);  // no telemetry: the old projection has nothing to go on
}

INSTANTIATE_TEST_SUITE_P(Field, ProjectedFromTheTrace,
                         ::testing::Values(Calibrated{"acc_edge", 33298181120}, Calibrated{"ec_edge", 16933442560},
                                           Calibrated{"ec_lo", 16933442560}, Calibrated{"fsdp_edge", 36095979520},
                                           Calibrated{"lit_edge", 26560292352}, Calibrated{"seg_edge", 7810435072},
                                           Calibrated{"tut_edge", 43540715520},
                                           // BLOOM: the failing step is the longest, where the attention's L²
                                           // outweighs the logits' L (its scale by bytes, 2.39, is L² = 1.55²)
                                           Calibrated{"blm_edge", 36030381056}, Calibrated{"blm_lo", 36030381056},
                                           // torch.compile(dynamic=True), the first step at twice the length
                                           Calibrated{"slw_edge", 21064269312}),
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

// A ConvLSTM over a number of context frames drawn per batch (field clstm_edge): step 1 runs its cells over 12 frames
// where step 0 ran 9, at the same sizes, and fails in its last predicted frame. Step 0 aligns with all of its prefix
// but the three further frames (120 allocations, 15% of its bytes): no projection, and the reason says the loop ran
// longer. A step that does not align at all (field vq_edge) keeps the plain reason.
TEST(ProjectedFromTheTrace, AFailingStepThatLoopsLongerThanAnyBeforeSaysSo) {
  const TraceStepProjection& p = diagnose("clstm_edge").trace_projection;
  EXPECT_FALSE(p.available);
  EXPECT_NE(p.unavailable_reason.find("runs the statements of unit 1 more often than it did: 120 of its allocations"),
            std::string::npos)
      << p.unavailable_reason;
  EXPECT_NE(diagnose("vq_edge").trace_projection.unavailable_reason.find("no earlier unit allocates like"),
            std::string::npos);
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

/// Allocated under a function of the program (outside torch) that names evaluation.
bool in_evaluation(const snapshot::Snapshot& snap, snapshot::StackId stack) {
  for (const snapshot::FrameId f : python_frames(snap, stack)) {
    const snapshot::Frame& frame = snap.stacks.frame(f);
    if (torch_path(snap.strings.view(frame.filename)).empty() && names_evaluation(snap.strings.view(frame.name)))
      return true;
  }
  return false;
}

/// The live peak of `step`'s synthetic trace from the failing malloc on (a trace from the job's
/// start: no blocks before its first event).
std::uint64_t rest_peak(const ProjectedStep& step) {
  std::unordered_map<std::uint32_t, std::uint64_t> size_of;
  std::uint64_t level = 0, peak = 0;
  for (std::size_t k = 0; k < step.trace.ops.size(); ++k) {
    const replay::Op& op = step.trace.ops[k];
    if (op.kind == replay::OpKind::kAlloc) {
      size_of[op.slot] = op.size;
      level += op.size;
    } else if (op.kind == replay::OpKind::kFree || op.kind == replay::OpKind::kFreeCompleted) {
      level -= size_of[op.slot];
      size_of[op.slot] = 0;
    }
    if (k >= step.projected_from_op) peak = std::max(peak, level);
  }
  return peak;
}

// What a projection from a single earlier unit misses, beyond its own doubts: the fit cannot
// be checked then (fixture frag_oom_104 fails in the second micro-step of its trace). Every
// complete recording of the fixtures, tests/data/heldout and tests/data/field, every unit after
// the first cut at its allocations of 1 MiB or more a quarter, half and three quarters in, and
// projected from the unit before it alone, as the doctor projects such a trace (a micro-step
// that runs the optimizer against one that does not left out: the verdict is on the failing
// step's own work; an eval pass inside the unit's iteration ends it). Within 1/e..e of its
// reference, the real peak of the rest of the unit never lay more than 3.62% above the
// projection plus its under_bytes (field cnxe_*; 0.48% before that recording): the doctor keeps 4%
// there (traced_oom_verdict.cpp, kUncheckedNearReference); further, 7.9% (kUncheckedProjection keeps 8%).
// That holds between units of one size; between batches that vary it did not: the translation
// tutorial's source and target lengths vary apart (field trn_*), and a quarter into a step the prefix
// (the encoder's) shows one scale while the decoder's rest peaked 74% above the projection. Unchecked,
// such a projection decides no fragmentation (kFewBatchesSeen, kUncheckedSeveralScales), nor anything
// when its sizes follow the reference by more than one scale (left out here).
// The other way, the projection lay at most 5.1% above the real peak beyond its over_bytes, 8.06% from a first
// step alike the failing one (slin_*: a sequence-length warm-up, 256 tokens projecting 448), and 11.7% from a
// first step unlike it (rx_lo: cudnn.benchmark's trials in it), which kUncheckedProjection (9%) and
// kUncheckedFromFirstStep cover. The doubts of a unit smaller than its
// reference stay doubts: they once wrapped around (ec_edge at 1/3 of its reference: an
// over_bytes of 2^64 less a few GiB).
TEST(ProjectedFromOneUnit, MissesTheRealPeakByLessThanTheUncheckedMargins) {
  std::vector<std::pair<std::string, std::filesystem::path>> recordings;
  for (const auto& f : fragscope::testing::snapshot_fixtures())
    if (f.name != "big") recordings.emplace_back(f.name, f.snapshot);
  const auto root = std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "tests" / "data";
  for (const char* folder : {"heldout", "field"})
    for (const auto& entry : std::filesystem::directory_iterator(root / folder))
      for (const char* file : {"snapshot.pickle.gz", "oom_snapshot.pickle.zst"})
        if (std::filesystem::exists(entry.path() / file))
          recordings.emplace_back(entry.path().filename().string(), entry.path() / file);
  std::size_t cuts = 0, near = 0, several_scales = 0;
  double worst_varying = 0;  // real above the projection and its under_bytes, between batches that vary
  double worst_near = 0, worst_far = 0;  // one size: real above the projection and its under_bytes, by the real peak
  double worst_high_first = 0, worst_high_later = 0;  // the projection above the real peak and its over_bytes
  for (const auto& [name, path] : recordings) {
    const snapshot::Snapshot snap = snapshot::read_snapshot_file(path.string());
    if (snap.device_traces.empty() || snap.trace(0).empty()) continue;
    const replay::PreparedTrace prepared = replay::prepare_trace(snap, 0, path.string());
    if (prepared.starts_mid_run) continue;
    const RecordedCurve curve = walk_recorded_curve(snap, 0);
    const auto trace = snap.trace(0);
    std::size_t anchor = trace.size() - 1;  // the OOM, else the program's last allocation
    for (std::size_t i = 0; i < trace.size(); ++i)
      if (trace[i].action == snapshot::TraceAction::kOom) anchor = i;
    while (anchor > 0 && !(trace[anchor].action == snapshot::TraceAction::kOom ||
                           (trace[anchor].action == snapshot::TraceAction::kAlloc && trace[anchor].stack != 0 &&
                            !python_frames(snap, trace[anchor].stack).empty())))
      --anchor;
    const TraceUnits units = find_trace_units(snap, 0, anchor);
    if (units.eval) continue;
    const auto runs_optimizer = [&](std::size_t u) {
      for (std::size_t i = units.starts[u]; i < units.iteration_ends[u]; ++i)
        if (trace[i].action == snapshot::TraceAction::kAlloc && trace[i].stack != 0 &&
            made_by_optimizer(snap, trace[i].stack))
          return true;
      return false;
    };
    // The Python call paths an iteration allocated from: an iteration that runs code the one before did not (or
    // the reverse) does another pass (field pinn_*: every third step scores candidate points after its update).
    const auto call_paths = [&](std::size_t u) {
      std::set<std::vector<snapshot::FrameId>> paths;
      for (std::size_t i = units.starts[u]; i < units.iteration_ends[u]; ++i)
        if (trace[i].action == snapshot::TraceAction::kAlloc && trace[i].stack != 0)
          paths.insert(python_frames(snap, trace[i].stack));
      return paths;
    };
    for (std::size_t k = 1; k + 1 < units.starts.size() && k < units.iteration_ends.size(); ++k) {
      // A micro-step that runs the optimizer, projected from one that does not (or the reverse),
      // is another pass at its end: the doctor's verdict is on the failing step's own work; so is an iteration
      // with a pass of its own, whose peak the doctor checks the fit on other units for.
      if (runs_optimizer(k - 1) != runs_optimizer(k) || call_paths(k - 1) != call_paths(k)) continue;
      std::vector<std::size_t> allocs;
      for (std::size_t i = units.starts[k]; i < units.iteration_ends[k]; ++i)
        if (trace[i].action == snapshot::TraceAction::kAlloc) allocs.push_back(i);
      for (const double at : {0.25, 0.5, 0.75}) {
        auto cut = static_cast<std::size_t>(at * static_cast<double>(allocs.size()));
        while (cut < allocs.size() && trace[allocs[cut]].size < (1u << 20)) ++cut;
        if (cut >= allocs.size()) continue;
        TraceUnits two = units;
        two.starts = {units.starts[k - 1], units.starts[k]};
        two.ends = {units.ends[k - 1]};
        two.iteration_ends = {units.iteration_ends[k - 1]};
        const ProjectedStep step = project_step_from_trace(prepared, snap, 0, curve, allocs[cut], two);
        if (!step.figures.available) continue;
        if (!step.figures.follows_one_scale) {  // unchecked, the doctor does not use it (kUncheckedSeveralScales)
          ++several_scales;
          continue;
        }
        const auto projected = static_cast<double>(rest_peak(step));
        std::size_t end = allocs[cut] + 1;  // the unit's end, or an eval pass inside its iteration
        while (end < units.iteration_ends[k] &&
               !(trace[end].action == snapshot::TraceAction::kAlloc && in_evaluation(snap, trace[end].stack)))
          ++end;
        const auto real = static_cast<double>(
            *std::max_element(curve.allocated.begin() + static_cast<std::ptrdiff_t>(allocs[cut]),
                              curve.allocated.begin() + static_cast<std::ptrdiff_t>(end)));
        const double miss = (real - projected - static_cast<double>(step.figures.under_bytes)) / real;
        const double high = (projected - static_cast<double>(step.figures.over_bytes) - real) / real;
        // A first step that allocated more than the failing prefix has (cudnn.benchmark's trials) keeps the
        // doctor's kUncheckedFromFirstStep; one alike (kFirstStepAlikeShare) the later steps' margin.
        const bool unlike_first = k == 1 && static_cast<double>(step.figures.reference_unmatched_bytes) > 0.05 * real;
        double& worst_high = unlike_first ? worst_high_first : worst_high_later;
        EXPECT_LT(high, unlike_first ? 0.12 : 0.09) << name << " unit " << k << " cut " << allocs[cut];
        worst_high = std::max(worst_high, high);
        EXPECT_LT(step.figures.over_bytes, 1ull << 50) << name << " unit " << k;  // no wraparound
        EXPECT_LT(step.figures.under_bytes, 1ull << 50) << name << " unit " << k;
        // Unchecked, a projection between batches that vary decides no fragmentation (kFewBatchesSeen,
        // kUncheckedSeveralScales): the rest of the step may follow a dimension its prefix does not show.
        const bool varies = step.figures.varying_units > 0;
        if (varies) worst_varying = std::max(worst_varying, miss);
        if (std::abs(std::log(step.figures.scale)) < 1.0) {
          if (!varies) {
            EXPECT_LT(miss, 0.04) << name << " unit " << k << " cut " << allocs[cut];
          }
          if (!varies) worst_near = std::max(worst_near, miss);
          ++near;
        } else {
          if (!varies) {
            EXPECT_LT(miss, 0.08) << name << " unit " << k << " cut " << allocs[cut];
          }
          if (!varies) worst_far = std::max(worst_far, miss);
        }
        ++cuts;
      }
    }
  }
  std::cout << cuts << " cuts; within 1/e..e of the reference (" << near << "), the real peak at most "
            << 100 * worst_near << "% above the projection and its under_bytes; further, " << 100 * worst_far
            << "%; the projection at most " << 100 * worst_high_later << "% above the real peak and its over_bytes ("
            << 100 * worst_high_first << "% from a first step unlike the failing one); " << several_scales
            << " cuts whose sizes follow the reference by more than one scale left out; between batches that vary, "
            << "the real peak at most " << 100 * worst_varying << "% above the projection\n";
  EXPECT_GE(near, 250u);
}

// A ring that cut the step before the failing one (field ring_edge): the doctor cannot project
// from a step whose head is lost, and says how long a whole step is, from the cut step's tail
// aligned backwards from the failing malloc. Measured on every complete recording of the
// fixtures, tests/data/heldout and tests/data/field: its last training unit taken as failing at
// its first allocation of 1 MiB or more past the middle, the trace cut a quarter, half and three
// quarters into the unit before; where the estimate is made, it lies within 0.8..1.25 of that
// unit's real length in events (its start to the next unit's).
TEST(CutUnit, TheLengthOfAWholeUnitIsEstimatedFromItsTail) {
  std::vector<std::filesystem::path> recordings;
  for (const auto& f : fragscope::testing::snapshot_fixtures())
    if (f.name != "big") recordings.push_back(f.snapshot);
  const auto root = std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "tests" / "data";
  for (const char* folder : {"heldout", "field"})
    for (const auto& entry : std::filesystem::directory_iterator(root / folder))
      for (const char* file : {"snapshot.pickle.gz", "oom_snapshot.pickle.zst"})
        if (std::filesystem::exists(entry.path() / file)) recordings.push_back(entry.path() / file);
  std::size_t estimated = 0, cuts = 0;
  double lowest = 1e9, highest = 0;
  for (const auto& path : recordings) {
    const snapshot::Snapshot whole = snapshot::read_snapshot_file(path.string());
    if (whole.device_traces.empty() || whole.trace(0).empty()) continue;
    if (replay::prepare_trace(whole, 0, path.string()).starts_mid_run) continue;
    const auto trace = whole.trace(0);
    std::size_t anchor = trace.size() - 1;
    while (anchor > 0 && !(trace[anchor].action == snapshot::TraceAction::kAlloc && trace[anchor].stack != 0 &&
                           !python_frames(whole, trace[anchor].stack).empty()))
      --anchor;
    const TraceUnits units = find_trace_units(whole, 0, anchor);
    if (units.eval || units.starts.size() < 3) continue;
    const std::size_t k = units.starts.size() - 2;  // the last complete unit: the failing one's place
    std::size_t failing = units.starts[k] + (units.iteration_ends[k] - units.starts[k]) / 2;
    while (failing < units.iteration_ends[k] &&
           !(trace[failing].action == snapshot::TraceAction::kAlloc && trace[failing].size >= (1u << 20) &&
             trace[failing].stack != 0 && !python_frames(whole, trace[failing].stack).empty()))
      ++failing;
    if (failing >= units.iteration_ends[k]) continue;
    const std::size_t real = units.starts[k] - units.starts[k - 1];
    for (const double at : {0.25, 0.5, 0.75}) {
      snapshot::Snapshot snap = snapshot::read_snapshot_file(path.string());
      const auto cut = units.starts[k - 1] + static_cast<std::size_t>(at * static_cast<double>(real));
      auto& events = snap.device_traces[0];
      events.erase(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(cut));
      const replay::PreparedTrace prepared = replay::prepare_trace(snap, 0, path.string());
      const TraceUnits cut_units = find_trace_units(snap, 0, failing - cut);
      if (!prepared.starts_mid_run || cut_units.starts.size() != 2) continue;
      const ProjectedStep step =
          project_step_from_trace(prepared, snap, 0, walk_recorded_curve(snap, 0), failing - cut, cut_units);
      ++cuts;
      if (getenv("CUT_TRACE"))
        std::cout << path.parent_path().filename() << " " << at << " available " << step.figures.available << " "
                  << step.figures.unavailable_reason << "\n";
      if (!step.figures.cut_unit_events) continue;
      const double ratio = static_cast<double>(*step.figures.cut_unit_events) / static_cast<double>(real);
      EXPECT_GT(ratio, 0.8) << path << " cut " << at;
      EXPECT_LT(ratio, 1.25) << path << " cut " << at;
      lowest = std::min(lowest, ratio);
      highest = std::max(highest, ratio);
      ++estimated;
    }
  }
  std::cout << cuts << " cuts, " << estimated << " estimated: estimate / real length " << lowest << ".." << highest
            << "\n";
  EXPECT_GE(cuts, 20u);
}

TEST(CutUnit, RingEdgeSaysHowManyEntriesWouldHoldTwoWholeSteps) {
  const Diagnosis d = diagnose("ring_edge");
  EXPECT_EQ(to_string(d.verdict), "undetermined");
  ASSERT_TRUE(d.trace_projection.cut_unit_events.has_value());
  EXPECT_NEAR(static_cast<double>(*d.trace_projection.cut_unit_events), 5146, 50);
  ASSERT_FALSE(d.decide_with.empty());
  EXPECT_NE(d.decide_with.front().find("max_entries=16000"), std::string::npos) << d.decide_with.front();
}

}  // namespace
}  // namespace fragscope::diagnose

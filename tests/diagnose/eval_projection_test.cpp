// The eval batch the trace never ran before, projected from the training's call of the same
// function, on the field recordings of tests/data/field (third-party training code).
#include "diagnose/eval_projection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "diagnose/python_frames.h"
#include "diagnose/recorded_curve.h"
#include "diagnose/trace_units.h"
#include "field_recordings.h"
#include "replay/prepared_trace.h"
#include "replay/replay_engine.h"

namespace fragscope::diagnose {
namespace {

using fragscope::testing::field_dir;
using fragscope::testing::last_oom;
using fragscope::testing::read_field_snapshot;
using snapshot::TraceAction;

struct Recording {
  snapshot::Snapshot snap;
  replay::PreparedTrace prepared;
  RecordedCurve curve;
};

Recording load(const std::string& name) {
  Recording r{read_field_snapshot(name), {}, {}};
  r.prepared = replay::prepare_trace(r.snap, 0, name);
  r.curve = walk_recorded_curve(r.snap, 0);
  return r;
}

std::uint64_t ideal_peak(const replay::PreparedTrace& trace) {
  replay::ReplayOptions options;
  options.timeline_points = 0;
  return replay::run_replay(trace, replay::ModelKind::kIdeal, trace.recorded_config, options).stats.peak_reserved_bytes;
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

// Every complete eval batch these jobs ran before they failed (Lightning's validation, the
// DeepLabV3 recipe's evaluate(), the nn.Transformer tutorial's evaluate()), cut at each of its
// allocations of 1 MiB or more as if it had failed there: the two estimates bracket the real
// peak of the rest of the batch at every cut the doctor would project (the first batch of
// a pass; later batches are units that repeat, projected from the earlier ones). A cut in the
// eval's own code before it calls anything the training calls (its input batch) is not projected.
TEST(EvalProjection, BracketsTheRealPeakAtEveryCutOfCompleteEvalBatches) {
  std::size_t cuts = 0, unavailable = 0;
  double least_excess = 1e9;  // smallest (upper − real) / real
  for (const std::string name : {"lit_edge", "seg_edge", "tut_edge"}) {
    const Recording r = load(name);
    const auto trace = r.snap.trace(0);
    const std::size_t oom = last_oom(r.snap);
    for (std::size_t cut = 0; cut < oom; ++cut) {
      if (trace[cut].action != TraceAction::kAlloc || trace[cut].size < (1u << 20) ||
          !in_evaluation(r.snap, trace[cut].stack))
        continue;
      const TraceUnits units = find_trace_units(r.snap, 0, cut);
      if (!units.eval || units.repeats() || !units.eval_batch_start) continue;
      ProjectedStep step = project_eval_from_training(r.prepared, r.snap, 0, r.curve, cut, *units.eval_batch_start,
                                                      units.eval_statement);
      if (!step.figures.available) {  // a cut in the eval's own code before any call the training shares
        ++unavailable;
        continue;
      }
      // The batch ends where the next one begins (its first allocation's stack again) or the
      // training resumes.
      const snapshot::StackId first = trace[*units.eval_batch_start].stack;
      std::size_t end = cut + 1;
      while (end < oom && !(trace[end].action == TraceAction::kAlloc && trace[end].stack != 0 &&
                            (trace[end].stack == first || (!python_frames(r.snap, trace[end].stack).empty() &&
                                                           !in_evaluation(r.snap, trace[end].stack)))))
        ++end;
      const std::uint64_t real = *std::max_element(r.curve.allocated.begin() + static_cast<std::ptrdiff_t>(cut),
                                                   r.curve.allocated.begin() + static_cast<std::ptrdiff_t>(end));
      const std::uint64_t upper = step.figures.most_peak_bytes;
      EXPECT_LE(step.figures.least_peak_bytes, real) << name << " cut " << cut;
      EXPECT_GE(upper + 4096, real) << name << " cut " << cut;  // sizes scaled in floating point
      if (getenv("EVAL_PROJECTION_TRACE"))
        std::cout << name << " cut " << cut << " start " << *units.eval_batch_start << " shared "
                  << step.figures.shared_function << " upper " << upper / 1048576 << " least "
                  << step.figures.least_peak_bytes / 1048576 << " real " << real / 1048576 << " live "
                  << step.figures.live_at_oom_bytes / 1048576 << " scale " << step.figures.scale << "\n";
      if (getenv("EVAL_PROJECTION_TRACE") && upper + 4096 < real)
        for (std::size_t k = step.projected_from_op; k < step.trace.ops.size(); ++k)
          if (step.trace.ops[k].size >= (100u << 20) || step.trace.ops[k].kind != replay::OpKind::kAlloc)
            std::cout << "  op " << static_cast<int>(step.trace.ops[k].kind) << " slot " << step.trace.ops[k].slot
                      << " size " << step.trace.ops[k].size / 1048576 << "\n";
      least_excess =
          std::min(least_excess, (static_cast<double>(upper) - static_cast<double>(real)) / static_cast<double>(real));
      ++cuts;
    }
  }
  EXPECT_GE(cuts, 100u);
  EXPECT_LE(unavailable, cuts / 20);
  std::cout << cuts << " cuts projected, " << unavailable << " not; the upper estimate at least " << 100 * least_excess
            << "% above the real peak\n";
}

// HF Trainer (GPT-NeoX, gradient checkpointing), history from step 3: the first eval pass of
// the trace fails in its loss. The eval and the training call `compute_loss` from different
// sites; below it the frames differ too (the training checkpoints each layer), so allocations
// are matched by their innermost frames. What is left is the rest of the cross-entropy: the
// eval batch peaks at the failing malloc, 32828603904 bytes, the very figure of the rerun under
// expandable segments, which completed (max_memory_allocated).
TEST(EvalProjection, HfTrainersFirstEvalIsProjectedFromComputeLoss) {
  const Recording r = load("hfn_edge");
  const std::size_t oom = last_oom(r.snap);
  const TraceUnits units = find_trace_units(r.snap, 0, oom);
  ASSERT_TRUE(units.eval && units.eval_batch_start);
  ProjectedStep step =
      project_eval_from_training(r.prepared, r.snap, 0, r.curve, oom, *units.eval_batch_start, units.eval_statement);
  const TraceStepProjection& p = step.figures;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  EXPECT_EQ(p.shared_function, "trainer.py in compute_loss");
  EXPECT_EQ(p.training_call.rfind("trainer.py:", 0), 0u) << p.training_call;
  EXPECT_NE(p.training_call.find("training_step"), std::string::npos) << p.training_call;
  EXPECT_EQ(p.matched_allocations, p.prefix_allocations);
  EXPECT_NEAR(p.scale, 40.0 * 2048 / (16.0 * 2048), 0.01);  // eval batch 40 against 16, both 2048 tokens
  std::ifstream in(field_dir("hfn_edge") / "truth.json");
  const auto truth = nlohmann::json::parse(in);
  const auto rerun_peak = truth["rerun"]["max_memory_allocated"].get<double>();
  EXPECT_NEAR(static_cast<double>(p.most_peak_bytes), rerun_peak, 0.001 * rerun_peak);
  EXPECT_GE(ideal_peak(step.trace), p.most_peak_bytes);  // the synthetic trace runs the same blocks
  EXPECT_NEAR(static_cast<double>(p.least_peak_bytes), rerun_peak, 0.001 * rerun_peak);
}

// Without an evaluation function name and without a shared loss function (the eval is inline in
// the loop of `run`, as in the fixtures' recorder), the shared call is the model's: the loop
// function both statements are in is not it.
TEST(EvalProjection, AnInlineEvalSharesTheModelCallNotItsLoop) {
  const Recording r = load("tut_edge");
  const auto trace = r.snap.trace(0);
  const auto in_model_call = [&](snapshot::StackId stack) {  // `output = model(data, mask)` in evaluate()
    const auto frames = python_frames(r.snap, stack);
    return std::any_of(frames.begin(), frames.end(), [&](snapshot::FrameId f) {
      const snapshot::Frame& frame = r.snap.stacks.frame(f);
      return r.snap.strings.view(frame.name) == "evaluate" && frame.line == 91;
    });
  };
  std::size_t cut = 0;  // the first 1 MiB allocation of the model's forward in evaluate()
  while (
      !(trace[cut].action == TraceAction::kAlloc && trace[cut].size >= (1u << 20) && in_model_call(trace[cut].stack)))
    ++cut;
  const TraceUnits units = find_trace_units(r.snap, 0, cut);
  ASSERT_TRUE(units.eval_batch_start);
  const ProjectedStep step =
      project_eval_from_training(r.prepared, r.snap, 0, r.curve, cut, *units.eval_batch_start, units.eval_statement);
  ASSERT_TRUE(step.figures.available) << step.figures.unavailable_reason;
  EXPECT_EQ(step.figures.shared_function, "module.py in _wrapped_call_impl");
}

}  // namespace
}  // namespace fragscope::diagnose

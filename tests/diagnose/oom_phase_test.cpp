// The phase of an OOM. On every recorded OOM (fixtures and held-out runs) it must be the phase
// the recorder logged (truth.json / label.json "oom_phase": eval_spike and heldout/eval died in
// the eval pass, the others in a training step), from the trace and telemetry alone. By hand:
// which annotation is open at a moment, and the order of the evidence.
#include "diagnose/oom_phase.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "../fixture_support.h"
#include "../hand_built_snapshot.h"
#include "inputs/telemetry_reader.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::diagnose {
namespace {

namespace fs = std::filesystem;
using snapshot::TraceAction;
using testing::HandBuiltSnapshot;

struct RecordedOomRun {
  std::string name;
  fs::path dir;
  std::string snapshot_file;
  std::string expected_phase;
};

void PrintTo(const RecordedOomRun& r, std::ostream* out) { *out << r.name; }

/// Recorded OOM runs with the phase the recorder logged. Held-out runs whose label carries a
/// "doctor_phase" (the recorder's phase is not decidable from the trace; label.json says why)
/// are left out.
std::vector<RecordedOomRun> recorded_oom_runs() {
  std::vector<RecordedOomRun> runs;
  for (const auto& f : testing::snapshot_fixtures()) {
    if (f.snapshot.filename() != "snapshot.pickle.zst" || !f.truth["oom_phase"].is_string()) continue;
    runs.push_back({f.name, f.snapshot.parent_path(), "snapshot.pickle.zst", f.truth["oom_phase"]});
  }
  const fs::path heldout = fs::path(FRAGSCOPE_SOURCE_DIR) / "tests/data/heldout";
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(heldout)) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    const auto label = testing::read_json(dir / "label.json");
    if (!label["oom_phase"].is_string() || label.contains("doctor_phase") || !fs::exists(dir / "snapshot.pickle.gz"))
      continue;
    std::string name = "heldout_" + dir.filename().string();
    std::replace(name.begin(), name.end(), '.', '_');
    runs.push_back({name, dir, "snapshot.pickle.gz", label["oom_phase"]});
  }
  return runs;
}

class RecordedOomPhase : public ::testing::TestWithParam<RecordedOomRun> {};

TEST_P(RecordedOomPhase, IsThePhaseTheRecorderLogged) {
  const auto& run = GetParam();
  const auto snap = snapshot::read_snapshot_file((run.dir / run.snapshot_file).string());
  const int device = snapshot::busiest_device(snap);
  const auto oom_index = snapshot::last_oom_index(snap, device);
  ASSERT_TRUE(oom_index.has_value()) << "the trace holds the OOM";
  std::vector<inputs::StepRecord> steps;
  if (fs::exists(run.dir / "steps.jsonl")) steps = inputs::read_telemetry_file(run.dir / "steps.jsonl");
  const OomCallPath path = analyze_oom_call_path(snap, device, *oom_index);
  const OomPhase phase = decide_oom_phase(&snap, device, oom_index, &path, steps);
  EXPECT_EQ(phase.phase, run.expected_phase) << phase.source;
  EXPECT_FALSE(phase.source.empty());
  EXPECT_EQ(phase.repeats_step, phase.phase == "train") << phase.source;
}

INSTANTIATE_TEST_SUITE_P(Runs, RecordedOomPhase, ::testing::ValuesIn(recorded_oom_runs()),
                         [](const auto& info) { return info.param.name; });

/// A snapshot whose device 0 has one OOM at t = 1000 µs and `annotations` (time, stage, name).
HandBuiltSnapshot with_annotations(
    std::initializer_list<std::tuple<std::int64_t, std::string, std::string>> annotations) {
  HandBuiltSnapshot h;
  h.event(0, TraceAction::kAlloc, 0x1000, 512, 500).event(0, TraceAction::kOom, 0, 1 << 30, 1000);
  for (const auto& [time, stage, name] : annotations) {
    snapshot::Annotation a;
    a.device = 0;
    a.time_us = time;
    a.fields = {{h.snap.strings.intern("stage"), h.snap.strings.intern(stage)},
                {h.snap.strings.intern("name"), h.snap.strings.intern(name)}};
    snapshot::decode_annotation(a, h.snap.strings);
    h.snap.annotations.push_back(a);
  }
  return h;
}

TEST(OpenAnnotation, IsTheInnermostStartedAndNotEndedByThen) {
  const auto h = with_annotations({{100, "START", "train_step"},
                                   {200, "START", "validation"},
                                   {300, "START", "forward"},
                                   {400, "END", "forward"},
                                   {1200, "END", "validation"}});
  EXPECT_EQ(open_annotation(h.snap, 0, 1000), "validation");
  EXPECT_EQ(open_annotation(h.snap, 0, 350), "forward");
  EXPECT_EQ(open_annotation(h.snap, 0, 150), "train_step");
  EXPECT_EQ(open_annotation(h.snap, 0, 50), std::nullopt);
  EXPECT_EQ(open_annotation(h.snap, 1, 1000), std::nullopt) << "another device's annotations";
  // An END closes the annotation of its name, even when another opened after it is still open.
  const auto crossed =
      with_annotations({{100, "START", "eval_loop"}, {200, "START", "forward"}, {300, "END", "eval_loop"}});
  EXPECT_EQ(open_annotation(crossed.snap, 0, 1000), "forward");
}

OomPhase phase_with(const HandBuiltSnapshot& h, std::span<const inputs::StepRecord> steps) {
  return decide_oom_phase(&h.snap, 0, std::size_t{1}, nullptr, steps);
}

TEST(DecideOomPhase, AnOpenAnnotationNamesThePhase) {
  EXPECT_EQ(phase_with(with_annotations({{100, "START", "Optimizer.step#AdamW.step"}}), {}).phase, "optimizer");
  EXPECT_EQ(phase_with(with_annotations({{100, "START", "run_Validation"}}), {}).phase, "eval");
  EXPECT_EQ(phase_with(with_annotations({{100, "START", "save_checkpoint"}}), {}).phase, "checkpoint");
  // An annotation that names no phase decides nothing; one closed before the OOM neither. A phase's word must
  // begin a word of the name: "interval" is no evaluation, "unsaved" no checkpoint.
  EXPECT_EQ(phase_with(with_annotations({{100, "START", "forward"}}), {}).phase, "unknown");
  EXPECT_EQ(phase_with(with_annotations({{100, "START", "log_interval_stats"}}), {}).phase, "unknown");
  EXPECT_EQ(phase_with(with_annotations({{100, "START", "mask_invalid"}}), {}).phase, "unknown");
  EXPECT_EQ(phase_with(with_annotations({{100, "START", "drop_unsaved"}}), {}).phase, "unknown");
  EXPECT_EQ(phase_with(with_annotations({{100, "START", "[LightningModule]GPT.validation_step"}}), {}).phase, "eval");
  EXPECT_EQ(phase_with(with_annotations({{100, "START", "eval"}, {900, "END", "eval"}}), {}).phase, "unknown");
}

TEST(DecideOomPhase, AnnotationBeatsTelemetryWhichBeatsTheDefault) {
  inputs::StepRecord eval_record;
  eval_record.step = 12;
  eval_record.phase = "eval";
  inputs::StepRecord train_record;
  train_record.step = 11;
  const std::vector<inputs::StepRecord> ends_in_eval = {train_record, eval_record};
  const std::vector<inputs::StepRecord> only_train = {train_record};
  const auto annotated = with_annotations({{100, "START", "checkpoint"}});
  EXPECT_EQ(phase_with(annotated, ends_in_eval).phase, "checkpoint");
  const auto plain = with_annotations({});
  const OomPhase from_telemetry = phase_with(plain, ends_in_eval);
  EXPECT_EQ(from_telemetry.phase, "eval");
  EXPECT_NE(from_telemetry.source.find("12"), std::string::npos) << from_telemetry.source;
  const OomPhase default_train = phase_with(plain, only_train);
  EXPECT_EQ(default_train.phase, "train");
  EXPECT_TRUE(default_train.repeats_step);
  const OomPhase nothing = decide_oom_phase(nullptr, 0, std::nullopt, nullptr, {});
  EXPECT_EQ(nothing.phase, "unknown");
}

// A new statement after others repeated is a pass the earlier steps never ran (a model forward: eval) only if
// something before it trained; otherwise the repeats were no steps (a statement over two lines, field glow_edge).
TEST(DecideOomPhase, ANewForwardIsEvalOnlyAfterStepsThatTrained) {
  OomCallPath path;
  path.has_stack = true;
  path.loop_repeats = true;
  path.model_forward = true;
  path.statement = "glow_flow.py:103 in <module>";
  const OomPhase first = decide_oom_phase(nullptr, 0, std::nullopt, &path, {});
  EXPECT_EQ(first.phase, "unknown");
  EXPECT_FALSE(first.repeats_step);
  EXPECT_NE(first.source.find("no training step"), std::string::npos) << first.source;
  path.trained_before = true;
  const OomPhase eval = decide_oom_phase(nullptr, 0, std::nullopt, &path, {});
  EXPECT_EQ(eval.phase, "eval");
  EXPECT_NE(eval.source.find("a model forward outside the training step"), std::string::npos) << eval.source;
}

}  // namespace
}  // namespace fragscope::diagnose

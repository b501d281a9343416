// The verdict on a traced OOM in words (report/traced_oom_words.h), from the records the doctor
// makes of the recorded fixtures: each line states the record's own numbers, the rule that
// decided picks the lines, and the doctor keeps the words, in order, among the OOM's other facts.
#include "report/traced_oom_words.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "../diagnose/doctor_fixture_files.h"
#include "../diagnose/field_recordings.h"
#include "diagnose/doctor.h"
#include "../doctor_options.h"
#include "util/bytes.h"

namespace fragscope::report {
namespace {

using diagnose::Diagnosis;
using diagnose::Evidence;
using diagnose::PhaseReason;
using diagnose::TracedOomFindings;
using diagnose::TracedOomRule;
using diagnose::TracedOomWords;

/// The doctor's diagnosis with the record its traced-OOM verdict made and the words it got.
struct Worded {
  TracedOomFindings findings;
  TracedOomWords words;
  Diagnosis diagnosis;
};

Worded diagnose_worded(std::vector<std::string> files) {
  Worded w;
  diagnose::DoctorOptions options = fragscope::testing::doctor_options();
  options.threads = 2;
  options.word_traced_oom = [&w](const TracedOomFindings& f) {
    w.findings = f;
    w.words = traced_oom_words(f);
    return w.words;
  };
  w.diagnosis = diagnose::run_doctor(diagnose::collect_doctor_inputs(files), options);
  return w;
}

const Evidence& evidence(const TracedOomWords& words, const std::string& key) {
  const auto it = std::find_if(words.evidence.begin(), words.evidence.end(),
                               [&](const Evidence& e) { return e.key == key; });
  if (it == words.evidence.end()) throw std::runtime_error("no evidence " + key);
  return *it;
}

std::ptrdiff_t position(const TracedOomWords& words, const std::string& key) {
  return std::find_if(words.evidence.begin(), words.evidence.end(), [&](const Evidence& e) { return e.key == key; }) -
         words.evidence.begin();
}

// The doctor keeps every word as the renderer made it: the evidence after the OOM's sources,
// before the blind spot; the trigger, the phase's source and what would decide it unchanged.
void expect_kept(const Worded& w) {
  const std::vector<Evidence>& all = w.diagnosis.evidence;
  const auto first = std::find_if(all.begin(), all.end(), [](const Evidence& e) { return e.key != "oom"; });
  ASSERT_GE(static_cast<std::size_t>(all.end() - first), w.words.evidence.size());
  for (std::size_t i = 0; i < w.words.evidence.size(); ++i) {
    EXPECT_EQ(first[i].key, w.words.evidence[i].key);
    EXPECT_EQ(first[i].text, w.words.evidence[i].text);
  }
  EXPECT_EQ(w.diagnosis.trigger, w.words.trigger);
  EXPECT_EQ(w.diagnosis.phase_source, w.words.phase_source);
  EXPECT_EQ(w.diagnosis.decide_with, w.words.decide_with);
}

TEST(TracedOomWords, AStepThatFitsStatesItsProjectedPeakAgainstTheCapacity) {
  const Worded w = diagnose_worded(fragscope::testing::doctor_user_files("frag_oom_104"));
  const TracedOomFindings& f = w.findings;
  ASSERT_EQ(f.rule, TracedOomRule::kStepFits);
  ASSERT_TRUE(f.best.has_value());
  EXPECT_EQ(evidence(w.words, "capacity").text,
            "capacity " + format_bytes(f.capacity_bytes) + ": " + f.capacity_source);
  EXPECT_EQ(evidence(w.words, "projection_vs_capacity").text,
            "the step's projected peak " + format_bytes(f.needed_bytes) + " fits in " + format_bytes(f.capacity_bytes) +
                " (" + format_bytes(f.capacity_bytes - f.needed_bytes) + " to spare with perfect packing)");
  // The failing step is longer than every recorded one: the trigger says by how much.
  ASSERT_TRUE(f.longest_batch);
  EXPECT_EQ(w.words.trigger.rfind("the longest batch of the run so far: step ", 0), 0u) << w.words.trigger;
  EXPECT_NE(w.words.trigger.find(std::to_string(f.max_recorded_tokens) + " tokens"), std::string::npos);
  EXPECT_TRUE(w.words.decide_with.empty());
  // The phase as the call path told it, before the call site.
  EXPECT_EQ(f.found_reason, diagnose::PhaseReason::kCallPath);
  EXPECT_EQ(evidence(w.words, "phase").text, "phase " + f.phase + ": " + f.clues.source);
  EXPECT_LT(position(w.words, "phase"), position(w.words, "call_site"));
  expect_kept(w);
}

TEST(TracedOomWords, AStepThatNeedsMoreSaysByHowMuch) {
  const Worded w = diagnose_worded(fragscope::testing::doctor_user_files("capacity_oom"));
  const TracedOomFindings& f = w.findings;
  ASSERT_EQ(f.rule, TracedOomRule::kStepExceeds);
  ASSERT_GT(f.needed_bytes, f.capacity_bytes);
  EXPECT_NE(evidence(w.words, "projection_vs_capacity").text.find("short by " +
                                                                   format_bytes(f.needed_bytes - f.capacity_bytes)),
            std::string::npos);
  EXPECT_EQ(evidence(w.words, "ideal_packer").text.rfind("the ideal packer serves the failing ", 0), 0u);
  expect_kept(w);
}

TEST(TracedOomWords, AFirstEvalPassIsWordedFromTheTrainingCall) {
  const Worded w = diagnose_worded(fragscope::testing::doctor_user_files("eval_spike"));
  const TracedOomFindings& f = w.findings;
  ASSERT_EQ(f.rule, TracedOomRule::kEvalExceeds);
  EXPECT_EQ(f.phase, "eval");
  EXPECT_EQ(w.words.trigger, "an eval pass (" + f.trace.unit_statement +
                                 ") the trace never ran before, projected from the training's " +
                                 f.trace.shared_function + " call");
  EXPECT_NE(evidence(w.words, "projection_vs_capacity").text.find("at least " + format_bytes(f.needed_bytes)),
            std::string::npos);
  ASSERT_TRUE(f.optimizer_steps_done.has_value());
  EXPECT_NE(evidence(w.words, "optimizer_steps").text.find("holds " + std::to_string(*f.optimizer_steps_done)),
            std::string::npos);
  expect_kept(w);
}

// Without telemetry the step is projected from the trace: the phase is told from its unit, after
// the replays, and the fit's margins are stated in percent.
TEST(TracedOomWords, AStepProjectedFromTheTraceStatesItsUnitAndMargins) {
  const Worded w = diagnose_worded(fragscope::testing::field_user_files("ret_edge"));
  const TracedOomFindings& f = w.findings;
  ASSERT_TRUE(f.projected_unit);
  ASSERT_EQ(f.rule, TracedOomRule::kProjectedStepFits);
  ASSERT_TRUE(f.best_run.has_value());
  ASSERT_GT(f.trace.earlier_units, 1u);
  EXPECT_EQ(w.words.phase_source, "the failing unit's statement (" + f.trace.unit_statement + ") ran " +
                                      std::to_string(f.trace.earlier_units) +
                                      " times before in the trace: the training step repeating");
  EXPECT_EQ(std::count_if(w.words.evidence.begin(), w.words.evidence.end(),
                          [](const Evidence& e) { return e.key == "phase"; }),
            1);
  EXPECT_GT(position(w.words, "phase"), position(w.words, "replay_best"));
  EXPECT_NE(evidence(w.words, "fit").text.find(fmt::format("{:.1f}%", 100 * f.trace.margin_to_fit)),
            std::string::npos);
  EXPECT_NE(evidence(w.words, "projection_vs_capacity").text.find(format_bytes(f.next_needed_bytes) + " live"),
            std::string::npos);
  expect_kept(w);
}

// A checked fit that does not give the failing step's own sizes so far decides nothing: the words say by how much
// it missed them, at which scale, and what would decide. (blm_edge's record, its prefix misfit set as the fit had
// left it before the failing unit's scale was taken in the fit's terms: 43% at ×2.39.)
TEST(TracedOomWords, AFitThatMissesTheFailingStepsOwnSizesDecidesNothing) {
  TracedOomFindings f = diagnose_worded(fragscope::testing::field_user_files("blm_edge")).findings;
  ASSERT_TRUE(f.projected_unit);
  f.rule = TracedOomRule::kPrefixMisfit;
  f.trace.scale = 2.387;
  f.trace.prefix_misfit_share = 0.43;
  const TracedOomWords words = traced_oom_words(f);
  const std::string& text = evidence(words, "prefix_misfit").text;
  EXPECT_NE(text.find("at ×2.39, 43.0% of their paired bytes"), std::string::npos) << text;
  EXPECT_THROW(evidence(words, "projection_vs_capacity"), std::runtime_error);
  EXPECT_FALSE(words.decide_with.empty());
}

// A step that fits at the end of batches that grew step after step (field slin_lo, a sequence-length warm-up): the
// growth in numbers, what one more step grown as much needs against what a setting runs, and first among what would
// decide it, where the warm-up stops; then the batch size that would need more.
TEST(TracedOomWords, ABatchWarmUpSaysWhatOneMoreStepOfItNeeds) {
  const Worded w = diagnose_worded(fragscope::testing::field_user_files("slin_lo"));
  const TracedOomFindings& f = w.findings;
  ASSERT_EQ(f.rule, TracedOomRule::kBatchesGrow);
  const std::string& text = evidence(w.words, "batches_grow").text;
  EXPECT_NE(text.find(fmt::format("the {} before it in the trace each smaller than the one after it, the failing "
                                  "one ×{:.2f} the last",
                                  f.trace.growing_units, f.trace.last_growth)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(fmt::format("would need about {} live", format_bytes(f.grown_batch_needed_bytes))),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(fmt::format("more than the {}", format_bytes(f.longest_batch_limit_bytes))), std::string::npos)
      << text;
  EXPECT_GT(f.grown_batch_needed_bytes + f.setting_room_bytes, f.longest_batch_limit_bytes);
  ASSERT_GE(w.words.decide_with.size(), 2u);
  EXPECT_EQ(w.words.decide_with[0].rfind("where the warm-up stops", 0), 0u);
  EXPECT_EQ(w.words.decide_with[1].rfind("the sizes of the batches still to come", 0), 0u);
  EXPECT_TRUE(w.diagnosis.recommended_conf.empty());
  expect_kept(w);
}

// A step larger than the few earlier ones that fits: the fit in numbers, then why that decides nothing
// of the job, and first among what would decide it, the batch size that would need more (field fcn_lo:
// 3 earlier batches, its fit checked on them).
TEST(TracedOomWords, AStepLargerThanTheFewEarlierBatchesSaysTheBatchesAreUnseen) {
  const Worded w = diagnose_worded(fragscope::testing::field_user_files("fcn_lo"));
  const TracedOomFindings& f = w.findings;
  ASSERT_EQ(f.rule, TracedOomRule::kFewBatchesSeen);
  ASSERT_TRUE(f.best_run.has_value());
  const std::string& text = evidence(w.words, "unseen_batches").text;
  EXPECT_EQ(text.rfind("the failing step itself fits: " + format_bytes(f.next_needed_bytes) + " live", 0), 0u) << text;
  EXPECT_NE(text.find(fmt::format("×{:.2f} the size of the most alike", f.trace.scale)), std::string::npos) << text;
  EXPECT_NE(text.find("the largest of 4 one time in 5"), std::string::npos) << text;
  EXPECT_THROW(evidence(w.words, "projection_vs_capacity"), std::runtime_error);
  ASSERT_TRUE(f.batch_factor_at_capacity.has_value());
  ASSERT_FALSE(w.words.decide_with.empty());
  EXPECT_NE(w.words.decide_with.front().find(fmt::format("×{:.2f} its size", *f.batch_factor_at_capacity)),
            std::string::npos);
  EXPECT_TRUE(w.diagnosis.recommended_conf.empty());
  expect_kept(w);
}

// A first step on a trace that starts mid-run: what would decide it follows from how the history began. Field
// dps_edge recorded from its train(), after the model was built (blocks older than the trace carry no frames): an
// earlier start, not a longer ring; ppo_edge's ring of 100,000 wrapped (older blocks carry frames): a longer ring.
TEST(TracedOomWords, AMidRunFirstStepSaysHowItsHistoryBeganAndWhatWouldHoldMore) {
  const Worded late = diagnose_worded(fragscope::testing::field_user_files("dps_edge"));
  ASSERT_EQ(late.findings.found_reason, PhaseReason::kFirstStep);
  ASSERT_EQ(late.findings.history_start, snapshot::HistoryStart::kStartedLate);
  EXPECT_NE(late.words.phase_source.find("history began after the run had allocated the blocks it starts with"),
            std::string::npos)
      << late.words.phase_source;
  ASSERT_FALSE(late.words.decide_with.empty());
  const std::string& earlier = late.words.decide_with.front();
  EXPECT_NE(earlier.find("_record_memory_history two steps before the failing one at least"), std::string::npos)
      << earlier;
  EXPECT_EQ(earlier.find("max_entries"), std::string::npos) << earlier;
  for (const std::string& line : late.words.decide_with)  // the two whole steps say more
    EXPECT_EQ(line.find("a snapshot across the whole"), std::string::npos) << line;

  const Worded ring = diagnose_worded(fragscope::testing::field_user_files("ppo_edge"));
  ASSERT_EQ(ring.findings.history_start, snapshot::HistoryStart::kRingWrapped);
  EXPECT_NE(ring.words.phase_source.find("a ring of max_entries that wrapped"), std::string::npos)
      << ring.words.phase_source;
  ASSERT_FALSE(ring.words.decide_with.empty());
  EXPECT_NE(ring.words.decide_with.front().find("_record_memory_history(max_entries=300000) at least"),
            std::string::npos)
      << ring.words.decide_with.front();
}

// The run's first step with its history from the start (field ngpt_lo: nanoGPT, the OOM in the first backward):
// the trace holds all of the step that ran, so no longer history decides; the rerun comes first, then the step's
// peak from a run that completes it, against this device's capacity.
TEST(TracedOomWords, AFirstPassWithHistoryFromTheStartAsksForItsPeakNotALongerHistory) {
  const Worded w = diagnose_worded(fragscope::testing::field_user_files("ngpt_lo"));
  ASSERT_EQ(w.findings.found_reason, PhaseReason::kFirstStep);
  ASSERT_FALSE(w.findings.clues.starts_mid_run);
  ASSERT_EQ(w.words.decide_with.size(), 3u);
  EXPECT_NE(w.words.decide_with[0].find("expandable_segments:True at the same memory"), std::string::npos)
      << w.words.decide_with[0];
  EXPECT_NE(w.words.decide_with[1].find("the first step's peak from a run that completes it"), std::string::npos)
      << w.words.decide_with[1];
  EXPECT_NE(w.words.decide_with[1].find(format_bytes(w.findings.capacity_bytes) + " this device gives"),
            std::string::npos)
      << w.words.decide_with[1];
  for (const std::string& line : w.words.decide_with)
    EXPECT_EQ(line.find("a snapshot across the whole"), std::string::npos) << line;

  // So with AdamW's first step, whose state the OOM was allocating (field ditro_edge, history from the start).
  const Worded optimizer = diagnose_worded(fragscope::testing::field_user_files("ditro_edge"));
  ASSERT_EQ(optimizer.findings.phase, "optimizer");
  ASSERT_EQ(optimizer.words.decide_with.size(), 3u);
  EXPECT_NE(optimizer.words.decide_with[1].find("the optimizer step's peak from a run that completes it"),
            std::string::npos)
      << optimizer.words.decide_with[1];

  // So with history from the first step but the model loaded before it (field sb0_lo: the trace starts mid-run, yet
  // it holds the step's first embed before the failing one, so the pass began after history did).
  const Worded loaded_before = diagnose_worded(fragscope::testing::field_user_files("sb0_lo"));
  ASSERT_TRUE(loaded_before.findings.starts_mid_run);
  ASSERT_GT(loaded_before.findings.clues.earlier_units, 0u);
  ASSERT_EQ(loaded_before.words.decide_with.size(), 3u);
  EXPECT_NE(loaded_before.words.decide_with[1].find("the failing pass's peak from a run that completes it"),
            std::string::npos)
      << loaded_before.words.decide_with[1];
  for (const std::string& line : loaded_before.words.decide_with)
    EXPECT_EQ(line.find("a snapshot across the whole"), std::string::npos) << line;
}

// A loop keeping each step's logits (field leak_lo): the failing step fits, the next does not. The words name what
// each step kept, where, what the next step needs, and ask whether the run has one.
TEST(TracedOomWords, ARunThatGrowsNamesWhatEachStepKeepsAndAsksForTheStepsLeft) {
  const Worded w = diagnose_worded(fragscope::testing::field_user_files("leak_lo"));
  const TracedOomFindings& f = w.findings;
  ASSERT_EQ(f.rule, TracedOomRule::kRunGrows);
  ASSERT_GT(f.grown_needed_bytes, f.capacity_bytes);
  const diagnose::RunGrowth& g = f.growth;
  const std::string& text = evidence(w.words, "run_grows").text;
  for (const std::string& part :
       {format_bytes(g.per_step_bytes), format_bytes(g.kept_bytes), g.frame, format_bytes(f.grown_needed_bytes),
        fmt::format("each of its last {} steps", g.steps), std::string("The step after it needs at least")})
    EXPECT_NE(text.find(part), std::string::npos) << part << " in: " << text;
  ASSERT_FALSE(w.words.decide_with.empty());
  EXPECT_NE(w.words.decide_with.front().find("whether the run has another step"), std::string::npos)
      << w.words.decide_with.front();
  EXPECT_NE(w.words.decide_with.front().find("one more means capacity: it needs about " +
                                             format_bytes(f.grown_needed_bytes) + " where the device gives " +
                                             format_bytes(f.capacity_bytes)),
            std::string::npos)
      << w.words.decide_with.front();
  expect_kept(w);
}

// With room for more steps (the same record, three more steps' growth fitting), the words say how many, and more
// than that many left means capacity.
TEST(TracedOomWords, ARunThatGrowsWithRoomLeftSaysHowManyStepsFit) {
  TracedOomFindings f = diagnose_worded(fragscope::testing::field_user_files("leak_lo")).findings;
  f.growing_steps_that_fit = 3;
  f.grown_needed_bytes = f.capacity_bytes / 2;
  const TracedOomWords words = traced_oom_words(f);
  const std::string& text = evidence(words, "run_grows").text;
  EXPECT_NE(text.find("holds about 3 more"), std::string::npos) << text;
  ASSERT_FALSE(words.decide_with.empty());
  EXPECT_NE(words.decide_with.front().find("more than 3 means capacity, 3 or fewer fragmentation"), std::string::npos)
      << words.decide_with.front();
}

}  // namespace
}  // namespace fragscope::report

// The repeating unit of a training program found from its call stacks alone, on field
// recordings of third-party training code (HF Trainer, Lightning, a plain loop), recorded with
// PyTorch's default stacks ("all": C++ frames interleaved with the Python ones).
#include "diagnose/trace_units.h"

#include <gtest/gtest.h>

#include "../fixture_support.h"
#include "field_recordings.h"

namespace fragscope::diagnose {
namespace {

using fragscope::testing::last_oom;
using fragscope::testing::read_field_snapshot;

TraceUnits units_of(const snapshot::Snapshot& snap) { return find_trace_units(snap, 0, last_oom(snap)); }

// HF Trainer: trainer.train() wraps the whole loop; the steps are its _run_epoch's
// training_step statement (the data loader's statement between them breaks the episodes).
TEST(TraceUnits, HfTrainerStepsAreItsTrainingStepStatement) {
  const TraceUnits u = units_of(read_field_snapshot("hft_edge"));
  EXPECT_TRUE(u.anchor_is_oom);
  EXPECT_EQ(u.statement, "trainer.py:1842 in _run_epoch");
  EXPECT_EQ(u.starts.size(), 3u);  // steps 0 and 1, and step 2 that failed
  EXPECT_FALSE(u.eval);
}

// Lightning runs forward and backward as the closure of optimizer.step(closure); the OOM is in
// the backward pass, on autograd's thread, with no Python frames: the units come from the
// program's last allocation before it. The shallowest repeating statement (fit_loop's epoch
// loop) ran only twice, split by the validation pass; the steps are one level down.
// The script that was run names no pass: hf_t5_generate_eval.py (field t5g_lo) trains under the Seq2SeqTrainer
// and evaluates by generation; its OOM is in a training step, whose units are training steps.
TEST(TraceUnits, TheScriptsOwnNameSaysNoPass) {
  const TraceUnits u = units_of(read_field_snapshot("t5g_lo"));
  EXPECT_EQ(u.statement, "trainer.py:1842 in _run_epoch");
  EXPECT_FALSE(u.eval);
  EXPECT_EQ(u.starts.size(), 3u);
}

TEST(TraceUnits, LightningBackwardOomIsAnchoredOnTheProgramsLastAllocation) {
  const snapshot::Snapshot snap = read_field_snapshot("lit_edge");
  const TraceUnits u = units_of(snap);
  EXPECT_FALSE(u.anchor_is_oom);
  EXPECT_LT(u.anchor, last_oom(snap));
  EXPECT_EQ(u.statement, "training_epoch_loop.py:352 in advance");
  EXPECT_EQ(u.starts.size(), 10u);
}

// A plain loop at a module's top level: `torch.randint(..., device="cuda")` there records fewer
// Python frames than the forward (a prefix of them); such an allocation neither starts nor
// breaks a step, or every statement of the loop body would be one "step".
TEST(TraceUnits, CallsWithAPrefixOfTheFramesDoNotSplitSteps) {
  const TraceUnits u = units_of(read_field_snapshot("ec_edge"));
  EXPECT_EQ(u.statement, "llama_loop.py:44 in <module>");
  EXPECT_EQ(u.starts.size(), 9u);
}

// HF Trainer's first eval (at step 6) fails in its first batch. `_maybe_log_save_evaluate` ran
// before, at step 5, to log: that is no eval pass, so evaluation does not repeat; the failing
// eval batch began where its prediction_step did.
TEST(TraceUnits, HfTrainersFirstEvalIsNotItsLoggingRepeated) {
  const snapshot::Snapshot snap = read_field_snapshot("hfc_lo");
  const TraceUnits u = units_of(snap);
  EXPECT_TRUE(u.eval);
  EXPECT_FALSE(u.repeats());
  EXPECT_EQ(u.eval_statement, "trainer.py:1883 in _run_epoch");
  ASSERT_TRUE(u.eval_batch_start.has_value());
  EXPECT_LT(*u.eval_batch_start, last_oom(snap));
}

// AdamW's first step (held-out B_cap): the failing statement never ran before.
TEST(TraceUnits, AFirstOptimizerStepDoesNotRepeat) {
  const snapshot::Snapshot snap = snapshot::read_snapshot_file(
      (std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "tests/data/heldout/B_cap/snapshot.pickle.gz").string());
  EXPECT_FALSE(units_of(snap).repeats());
}

// ANCE-style dense retrieval (field hnr_edge): hard negatives are refreshed (line 158) before every 4th training
// step (line 163); history began at step 2, so the trace holds steps 2 and 3, then the first refresh, which OOMs.
// The refresh did not run before, but the training step after it in the loop's body did: the loop came back around.
// A first step (the heldout first AdamW step) has no later statement that ran before it.
TEST(TraceUnits, ALaterStatementThatRanBeforeTheFailingOneShowsTheLoopCameBackAround) {
  const TraceUnits u = units_of(read_field_snapshot("hnr_edge"));
  EXPECT_FALSE(u.repeats());
  EXPECT_EQ(u.later_statement, "hard_negative_refresh.py:163 in <module>");
  EXPECT_EQ(u.later_than, "hard_negative_refresh.py:158 in <module>");
  const snapshot::Snapshot first = snapshot::read_snapshot_file(
      (std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "tests/data/heldout/B_cap/snapshot.pickle.gz").string());
  EXPECT_EQ(units_of(first).later_statement, "");
}

// Tacotron 2 (field taco_edge) with history as a ring of about one step: the ring holds the end of step 1, then
// step 2's decoder loop and its postnet (line 115), which fails. Line 115 has no event before it in the ring, but
// step 1's `mel_post`, still bound to its variable, is live with its frames: it ran before the ring's start, so the
// optimizer step after it (line 123) is the step before's, not a loop come around to a new pass.
TEST(TraceUnits, AStatementWhoseOlderBlockOutlivedTheRingRanBefore) {
  const TraceUnits u = units_of(read_field_snapshot("taco_edge"));
  EXPECT_FALSE(u.repeats());
  EXPECT_EQ(u.later_statement, "");
  EXPECT_EQ(u.later_than, "");
}

// Full-batch L-BFGS as torch.optim's docs show it (field lbfgs_lo): the loop's body is one statement,
// optimizer.step(closure), and nothing allocates between two steps. Each step begins with the closure's first
// call (lbfgs.py's `orig_loss = closure()`): 17 steps ran before the failing 18th, whose backward OOMs.
TEST(TraceUnits, StepsOfOneOptimizerStepCallBeginAtTheClosuresFirstCall) {
  const snapshot::Snapshot snap = read_field_snapshot("lbfgs_lo");
  const TraceUnits u = units_of(snap);
  EXPECT_FALSE(u.anchor_is_oom);
  EXPECT_EQ(u.statement, "lbfgs_cnn.py:74 in <module>");
  ASSERT_EQ(u.starts.size(), 18u);
  ASSERT_EQ(u.ends.size(), 17u);
  for (std::size_t k = 0; k < 17; ++k) EXPECT_EQ(u.ends[k], u.starts[k + 1]);
  EXPECT_TRUE(u.first_unit_whole);
}

// The nn.Transformer tutorial's OOM is in loss.backward() (line 108): the units are its
// backward statements. Each earlier one ends where the next step begins (its causal mask and
// forward, lines 104-105), not at the next backward: that forward runs at the next step's length.
TEST(TraceUnits, ABackwardUnitEndsWhereTheNextStepBegins) {
  const snapshot::Snapshot snap = read_field_snapshot("tut_edge");
  const TraceUnits u = units_of(snap);
  EXPECT_EQ(u.statement, "tutorial_transformer.py:108 in <module>");
  ASSERT_EQ(u.starts.size(), 6u);
  ASSERT_EQ(u.iteration_ends.size(), 5u);
  for (std::size_t k = 0; k < 5; ++k) {
    EXPECT_GT(u.iteration_ends[k], u.starts[k]);
    EXPECT_LT(u.iteration_ends[k], u.starts[k + 1]);
  }
  // A forward unit's iteration ends at the next one or just before it (llama_loop.py makes its
  // ids at line 42, before the forward at line 44).
  const snapshot::Snapshot ec = read_field_snapshot("ec_edge");
  const TraceUnits forward = units_of(ec);
  ASSERT_EQ(forward.iteration_ends.size() + 1, forward.starts.size());
  for (std::size_t k = 0; k + 1 < forward.starts.size(); ++k)
    EXPECT_LE(forward.iteration_ends[k], forward.starts[k + 1]);
}

}  // namespace
}  // namespace fragscope::diagnose

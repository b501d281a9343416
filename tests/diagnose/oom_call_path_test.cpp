// The OOM's call path on the recorded OOMs (stacks="python"): the failing statement repeated
// exactly where the recorder says the OOM was in the training step (truth.json oom_phase
// "train": capacity_oom, frag_oom_104, frag_oom_observer) and ran for the first time where it
// was in an eval pass (eval_spike).
#include "diagnose/oom_call_path.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "field_recordings.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::diagnose {
namespace {

const std::filesystem::path kFixtures = FRAGSCOPE_FIXTURES_DIR;

struct RecordedOom {
  std::string oom_phase;  ///< truth.json
  OomCallPath path;
  std::size_t oom_index = 0;
};

RecordedOom analyze(const std::string& scenario) {
  RecordedOom r;
  std::ifstream truth(kFixtures / scenario / "truth.json");
  r.oom_phase = nlohmann::json::parse(truth).at("oom_phase").get<std::string>();
  const auto snap = snapshot::read_snapshot_file((kFixtures / scenario / "snapshot.pickle.zst").string());
  const int device = snapshot::busiest_device(snap);
  const auto trace = snap.trace(device);
  for (std::size_t i = 0; i < trace.size(); ++i)
    if (trace[i].action == snapshot::TraceAction::kOom) r.oom_index = i;
  r.path = analyze_oom_call_path(snap, device, r.oom_index);
  return r;
}

class RecordedOomCallPath : public ::testing::TestWithParam<std::string> {};

TEST_P(RecordedOomCallPath, RepeatsExactlyWhenTheOomWasInTheTrainingStep) {
  const RecordedOom r = analyze(GetParam());
  const OomCallPath& p = r.path;
  ASSERT_TRUE(p.has_stack);
  EXPECT_EQ(p.repeated, r.oom_phase == "train");
  EXPECT_TRUE(p.loop_repeats);  // every run failed after recorded steps
  // The eval pass's statement first ran after steps that trained; the training forward's first ran in step 0,
  // before anything had.
  EXPECT_EQ(p.trained_before, !p.repeated);
  // Every one failed inside a model forward, none in the optimizer or a checkpoint.
  EXPECT_TRUE(p.model_forward);
  EXPECT_FALSE(p.optimizer);
  EXPECT_FALSE(p.serialization);
  // The statement is a line of the recorder's loop; its episodes began in order, the failing
  // one last, the first at the statement's first allocation.
  EXPECT_EQ(p.statement.rfind("gen.py:", 0), 0u) << p.statement;
  EXPECT_NE(p.statement.find(" in run"), std::string::npos) << p.statement;
  ASSERT_EQ(p.episode_starts.size(), p.episodes);
  ASSERT_GE(p.episodes, 1u);
  EXPECT_EQ(p.episodes > 1, p.repeated);
  EXPECT_EQ(p.statement_first_seen, p.episode_starts.front());
  for (std::size_t i = 1; i < p.episode_starts.size(); ++i) EXPECT_LT(p.episode_starts[i - 1], p.episode_starts[i]);
  EXPECT_LT(p.episode_starts.back(), r.oom_index);
  EXPECT_GT(p.statement_span_ms, 0.0);
  EXPECT_FALSE(p.innermost.empty());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RecordedOomCallPath,
                         ::testing::Values("capacity_oom", "eval_spike", "frag_oom_104", "frag_oom_observer"));

TEST(OomCallPath, TheTrainingStepsOomsShareTheirStatementTheEvalPassHasItsOwn) {
  const RecordedOom capacity = analyze("capacity_oom");
  const RecordedOom fragmentation = analyze("frag_oom_104");
  const RecordedOom eval = analyze("eval_spike");
  EXPECT_EQ(capacity.path.statement, fragmentation.path.statement);  // the training forward
  EXPECT_NE(eval.path.statement, capacity.path.statement);
  // The eval pass's forward had allocated before its failing malloc; the statement is new.
  EXPECT_TRUE(eval.path.episode_forward);
  EXPECT_EQ(eval.path.episodes, 1u);
}

// stacks="all" (PyTorch's default): C++ frames interleave with the Python ones, differently from one
// allocation to the next (`_start`, the interpreter's, sometimes outside runpy's frames, sometimes not).
// torchvision's ViT recipe, run through runpy, failing in its first forward: compared on the Python
// frames, no statement repeats and the failing one is the forward's line. On all frames `??:0 in _start`
// looked like a statement that ran 25 times.
TEST(OomCallPath, CppFramesAroundThePythonOnesMakeNoStatement) {
  const snapshot::Snapshot snap = fragscope::testing::read_field_snapshot("vit_lo");
  const OomCallPath path = analyze_oom_call_path(snap, 0, fragscope::testing::last_oom(snap));
  EXPECT_EQ(path.statement, "tv_vit.py:29 in <module>");
  EXPECT_FALSE(path.repeated);
  EXPECT_EQ(path.innermost, "activation.py:816 in forward");
}

// Glow with history from step 1, failing in that step's forward: its data statement spans two lines, and Python names
// the line of the sub-expression it runs (101: randint, 102: rand, 101 again: the sum), so line 101 had two episodes
// before the OOM. Nothing before the failing statement ran on autograd's thread or in an optimizer: no earlier step.
TEST(OomCallPath, AStatementOverSeveralLinesIsNoEarlierStep) {
  const snapshot::Snapshot snap = fragscope::testing::read_field_snapshot("glow_edge");
  const OomCallPath path = analyze_oom_call_path(snap, 0, fragscope::testing::last_oom(snap));
  EXPECT_EQ(path.statement, "glow_flow.py:103 in <module>");
  EXPECT_TRUE(path.loop_repeats);
  EXPECT_FALSE(path.trained_before);
  EXPECT_FALSE(path.repeated);
  EXPECT_TRUE(path.model_forward);
}

}  // namespace
}  // namespace fragscope::diagnose

// A graph torch.compile generated for the failing unit, on field recordings: the HF Trainer with
// torch_compile=True (hfcmp_edge: dynamic padding, a new sequence length recompiles the step) and
// a job without torch.compile (gan_lo).
#include "diagnose/compiled_graph.h"

#include <gtest/gtest.h>

#include "diagnose/trace_units.h"
#include "field_recordings.h"

namespace fragscope::diagnose {
namespace {

using fragscope::testing::last_oom;
using fragscope::testing::read_field_snapshot;

TEST(InductorModuleTest, IsNamedByItsCodeHash) {
  EXPECT_TRUE(is_inductor_module("/tmp/torchinductor_root/he/che5aee5wcetur5cfbkoljgaktwngomqux447tc7ejsy3ciiqu3e.py"));
  EXPECT_TRUE(is_inductor_module("che5aee5wcetur5cfbkoljgaktwngomqux447tc7ejsy3ciiqu3e.py"));
  EXPECT_FALSE(is_inductor_module("trainer.py"));
  EXPECT_FALSE(is_inductor_module("che5aee5wcetur5cfbkoljgaktwngomqux447tc7ejsy3ciiqu3.py"));    // 50 characters
  EXPECT_FALSE(is_inductor_module("che5aee5wcetur5cfbkoljgaktwngomqux447tc7ejsy3ciiqu3e0.py"));  // 52
  EXPECT_FALSE(is_inductor_module("che5aee5wcetur5cfbkoljgaktwngomqux447tc7ejsy3ciiqu3e.pyc"));
  EXPECT_FALSE(is_inductor_module("che5aee5wcetur5cfbkoljgaktwngomqux447tc7ejsy3ciiqu38.py"));   // 8: not base 32
  EXPECT_FALSE(is_inductor_module("cHE5aee5wcetur5cfbkoljgaktwngomqux447tc7ejsy3ciiqu3e.py"));   // upper case
  EXPECT_FALSE(is_inductor_module("xhe5aee5wcetur5cfbkoljgaktwngomqux447tc7ejsy3ciiqu3e.py"));
}

// The fifth step's graph first runs inside it: its module appears at event 8040, the OOM is 8411.
TEST(CompiledAnewTest, TheFailingStepRunsAGraphNoEarlierStepRan) {
  const snapshot::Snapshot snap = read_field_snapshot("hfcmp_edge");
  const std::size_t oom = last_oom(snap);
  const TraceUnits units = find_trace_units(snap, 0, oom);
  ASSERT_TRUE(units.repeats());
  const std::size_t start = units.starts.back();
  const auto anew = compiled_anew(snap, 0, oom, start);
  ASSERT_TRUE(anew.has_value());
  EXPECT_EQ(anew->module, "che5aee5wcetur5cfbkoljgaktwngomqux447tc7ejsy3ciiqu3e.py");
  EXPECT_EQ(anew->first_event, 8040u);
  EXPECT_LE(start, anew->first_event);
  // Had the unit begun after the graph's first allocation, an earlier event would have run it.
  EXPECT_FALSE(compiled_anew(snap, 0, oom, anew->first_event + 1).has_value());
}

TEST(CompiledAnewTest, AnEagerJobHasNoGeneratedFrames) {
  const snapshot::Snapshot snap = read_field_snapshot("gan_lo");
  const std::size_t oom = last_oom(snap);
  EXPECT_FALSE(compiled_anew(snap, 0, oom, 0).has_value());
  EXPECT_FALSE(compiled_anew(snap, 0, oom, oom).has_value());
}

}  // namespace
}  // namespace fragscope::diagnose

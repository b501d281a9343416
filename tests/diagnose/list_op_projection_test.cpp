// The rest of an optimizer list op that failed part-way, on held-out H200 recordings of one
// workload (hidden 2560, 10 layers, one micro-step per optimizer step): B_cap ran out of memory
// in its first optimizer step, in AdamW's foreach sqrt (one result per parameter); its rerun
// under expandable segments failed in the same op, further along; B_frag, the same workload on
// a larger budget, completed that optimizer step, so its trace holds the step's real peak.
#include "diagnose/list_op_projection.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "diagnose/oom_call_path.h"
#include "diagnose/optimizer_code.h"
#include "diagnose/recorded_curve.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::diagnose {
namespace {

std::string heldout(const std::string& file) {
  return std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/heldout/" + file;
}

struct Recording {
  snapshot::Snapshot snapshot;
  RecordedCurve curve;
  std::size_t oom = 0;
};

Recording load(const std::string& file) {
  Recording r;
  r.snapshot = snapshot::read_snapshot_file(heldout(file));
  r.curve = walk_recorded_curve(r.snapshot, 0);
  const auto trace = r.snapshot.trace(0);
  while (r.oom < trace.size() && trace[r.oom].action != snapshot::TraceAction::kOom) ++r.oom;
  return r;
}

TEST(ListOpProjection, FinishesTheFailingForeachOpFromTheStatesSizes) {
  const Recording r = load("B_cap/snapshot.pickle.gz");
  const ListOpProjection p = project_failing_list_op(r.snapshot, 0, r.curve, r.oom);
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  EXPECT_EQ(p.site, "adam.py:791 in _multi_tensor_adam");
  EXPECT_EQ(p.list_site, "adam.py:178 in _init_group");
  EXPECT_EQ(p.done, 25u);
  EXPECT_EQ(p.total, 93u);
  EXPECT_EQ(p.projected_peak_bytes, r.curve.allocated[r.oom] + p.remaining_bytes);
  // What the op had made plus what it still needs is the whole list the state was made as.
  std::uint64_t made = 0, state = 0;
  const auto trace = r.snapshot.trace(0);
  for (std::size_t i = 0; i < r.oom; ++i) {
    if (trace[i].action != snapshot::TraceAction::kAlloc || trace[i].stack == 0) continue;
    const std::string site = describe_frame(r.snapshot, r.snapshot.stacks.stack(trace[i].stack).front());
    if (site == p.site) made += trace[i].size;
    if (site == p.list_site) state += trace[i].size;
  }
  EXPECT_EQ(made + p.remaining_bytes, state);
}

TEST(ListOpProjection, TheRerunThatFailedFurtherAlongProjectsTheSamePeak) {
  const Recording first = load("B_cap/snapshot.pickle.gz");
  const Recording rerun = load("B_cap/rerun_expandable_snapshot.pickle.gz");
  const ListOpProjection a = project_failing_list_op(first.snapshot, 0, first.curve, first.oom);
  const ListOpProjection b = project_failing_list_op(rerun.snapshot, 0, rerun.curve, rerun.oom);
  ASSERT_TRUE(a.available && b.available);
  EXPECT_GT(b.done, a.done);
  EXPECT_NEAR(static_cast<double>(a.projected_peak_bytes), static_cast<double>(b.projected_peak_bytes),
              0.002 * static_cast<double>(a.projected_peak_bytes));
}

TEST(ListOpProjection, MatchesTheOptimizerPeakOfTheRunThatCompletedIt) {
  const Recording failed = load("B_cap/snapshot.pickle.gz");
  const ListOpProjection p = project_failing_list_op(failed.snapshot, 0, failed.curve, failed.oom);
  ASSERT_TRUE(p.available);
  // B_frag's first optimizer step: the highest allocation made by torch/optim code before the
  // first allocation after it that was not.
  const Recording done = load("B_frag/snapshot.pickle.gz");
  const auto trace = done.snapshot.trace(0);
  std::uint64_t peak = 0;
  bool inside = false;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    if (trace[i].action != snapshot::TraceAction::kAlloc || trace[i].stack == 0) continue;
    const bool optimizer = made_by_optimizer(done.snapshot, trace[i].stack);
    if (!optimizer && inside) break;
    inside |= optimizer;
    if (optimizer) peak = std::max(peak, done.curve.allocated[i]);
  }
  ASSERT_GT(peak, 0u);
  EXPECT_NEAR(static_cast<double>(p.projected_peak_bytes), static_cast<double>(peak), 0.01 * static_cast<double>(peak));
}

TEST(ListOpProjection, OnlyForAnOptimizersMalloc) {
  const Recording r = load("cap/snapshot.pickle.gz");  // a forward pass's OOM
  const ListOpProjection p = project_failing_list_op(r.snapshot, 0, r.curve, r.oom);
  EXPECT_FALSE(p.available);
  EXPECT_NE(p.unavailable_reason.find("torch/optim"), std::string::npos);
}

}  // namespace
}  // namespace fragscope::diagnose

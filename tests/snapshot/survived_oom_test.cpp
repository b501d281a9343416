// Which `oom` entries the run went on from: those ATen catches (cuDNN's plan search, by the entry's C++
// frames) and those a later request shows were caught; the fatal one is the last of the rest.
#include "snapshot/survived_oom.h"

#include <gtest/gtest.h>

#include "../hand_built_snapshot.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::snapshot {
namespace {

using testing::HandBuiltSnapshot;

// The stack the unwinder records for a workspace cuDNN's plan loop asks for (tests/data/survived_oom/vid_edge),
// innermost first, with `runner` for run_conv_plan's frame.
StackId conv_plan_stack(HandBuiltSnapshot& h, const std::string& runner) {
  return h.stack({{"CUDACachingAllocator.cpp", 0,
                   "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"},
                  {"", 0, runner},
                  {"", 0, "at::native::run_single_conv(cudnnBackendDescriptorType_t, at::Tensor const&)"},
                  {"train.py", 38, "<module>"}});
}

TraceEvent& last(HandBuiltSnapshot& h) { return h.snap.device_traces[0].back(); }

TEST(SurvivedOom, TheLastOomWithNothingAfterItIsFatal) {
  HandBuiltSnapshot h;
  h.event(0, TraceAction::kAlloc, 1, 512).event(0, TraceAction::kOom, 0, 1 << 20);
  h.event(0, TraceAction::kFreeRequested, 1, 512).event(0, TraceAction::kSegmentFree, 1, 2 << 20);
  EXPECT_EQ(fatal_oom_index(h.snap, 0), 1u) << "frees after it are the handler's, not a request";
  EXPECT_EQ(survived_ooms(h.snap, 0).count, 0u);
  EXPECT_EQ(fatal_oom_index(h.snap, 1), std::nullopt) << "no trace for device 1";
}

TEST(SurvivedOom, AnOomFollowedByARequestWasCaughtByTheProgram) {
  HandBuiltSnapshot h;
  h.event(0, TraceAction::kOom, 0, 1 << 20).event(0, TraceAction::kAlloc, 1, 512);
  EXPECT_EQ(fatal_oom_index(h.snap, 0), std::nullopt);
  const SurvivedOoms s = survived_ooms(h.snap, 0);
  EXPECT_EQ(s.count, 1u);
  EXPECT_EQ(s.caught_by_aten, 0u);
  EXPECT_EQ(s.last_catcher, "");
}

TEST(SurvivedOom, CuDNNsPlanWorkspaceIsCaughtInsideATenEvenWhenTheTraceEndsThere) {
  HandBuiltSnapshot h;
  h.event(0, TraceAction::kOom, 0, 1 << 20);
  last(h).stack = conv_plan_stack(h, "at::native::run_conv_plan(cudnnContext*, at::Tensor const&)");
  EXPECT_EQ(aten_oom_catcher(h.snap, last(h)), "run_conv_plan");
  EXPECT_EQ(fatal_oom_index(h.snap, 0), std::nullopt) << "the observer dumped inside the plan loop";
  h.event(0, TraceAction::kOom, 0, 2 << 20);
  EXPECT_EQ(fatal_oom_index(h.snap, 0), 1u) << "an OOM of the program's own after it is fatal";
  const SurvivedOoms s = survived_ooms(h.snap, 0);
  EXPECT_EQ(s.count, 1u);
  EXPECT_EQ(s.caught_by_aten, 1u);
  EXPECT_EQ(s.last_catcher, "run_conv_plan");
}

TEST(SurvivedOom, EachCatchSiteIsATensOwnFunction) {
  HandBuiltSnapshot h;
  h.event(0, TraceAction::kOom, 0, 1 << 20);
  const auto catcher = [&](const std::string& frame) {
    last(h).stack = conv_plan_stack(h, frame);
    return std::string(aten_oom_catcher(h.snap, last(h)));
  };
  EXPECT_EQ(catcher("at::native::run_conv_plan_fused(cudnnContext*, at::Tensor const&)"), "run_conv_plan_fused");
  EXPECT_EQ(catcher("at::native::generate_and_filter_plans(cudnnContext*, cudnn_frontend::OperationGraph&)"),
            "generate_and_filter_plans");
  EXPECT_EQ(catcher("at::native::(anonymous namespace)::AlgoIterator<cudnnConvolutionFwdAlgoPerf_t>::try_all("
                    "std::function<void (cudnnConvolutionFwdAlgoPerf_t const&)>)"),
            "try_all");
  EXPECT_EQ(catcher("at::native::something_else::try_all(int)"), "") << "try_all of no AlgoIterator";
  EXPECT_EQ(catcher("mylib::run_conv_plan(int)"), "") << "not ATen's";
  EXPECT_EQ(catcher("run_conv_plan"), "") << "a Python function of that name";
  EXPECT_EQ(catcher("at::native::run_conv_plan_v2(int)"), "") << "the whole name, not a prefix";
  last(h).stack = 0;
  EXPECT_EQ(aten_oom_catcher(h.snap, last(h)), "") << "no frames recorded";
}

// The torchvision video recipe with cudnn.benchmark completed; the OOM observer dumped at each refused workspace
// of the benchmark's plans, and the file kept the last dump: its trace ends on an `oom` entry.
TEST(SurvivedOom, ARunThatCompletedHasNoFatalOom) {
  const Snapshot snap = read_snapshot_file(std::string(FRAGSCOPE_SOURCE_DIR) +
                                           "/tests/data/survived_oom/vid_edge/oom_snapshot.pickle.gz");
  ASSERT_EQ(last_oom_index(snap, 0), 11093u);
  EXPECT_EQ(fatal_oom_index(snap, 0), std::nullopt);
  const SurvivedOoms s = survived_ooms(snap, 0);
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.caught_by_aten, 2u);
  EXPECT_EQ(s.last_catcher, "run_conv_plan");
}

// When every plan's workspace is refused, ATen raises "unable to find an engine" and the run dies of the last
// refusal; the log says so (tests/data/survived_oom/no_plan), the trace alone cannot.
TEST(SurvivedOom, ACudnnThatFoundNoPlanDiedOfTheLastRefusal) {
  const Snapshot snap = read_snapshot_file(std::string(FRAGSCOPE_SOURCE_DIR) +
                                           "/tests/data/survived_oom/vid_edge/oom_snapshot.pickle.gz");
  EXPECT_EQ(fatal_oom_index(snap, 0, RunEnd::kCudnnFoundNoPlan), 11093u);
  const SurvivedOoms s = survived_ooms(snap, 0, RunEnd::kCudnnFoundNoPlan);
  EXPECT_EQ(s.count, 1u);
  EXPECT_EQ(s.caught_by_aten, 1u);
  // A request after the last refusal: the search found a plan, whatever another rank's log says.
  HandBuiltSnapshot h;
  h.event(0, TraceAction::kOom, 0, 1 << 20);
  last(h).stack = conv_plan_stack(h, "at::native::run_conv_plan(cudnnContext*)");
  EXPECT_EQ(fatal_oom_index(h.snap, 0, RunEnd::kCudnnFoundNoPlan), 0u);
  h.event(0, TraceAction::kAlloc, 1, 512);
  EXPECT_EQ(fatal_oom_index(h.snap, 0, RunEnd::kCudnnFoundNoPlan), std::nullopt);
}

}  // namespace
}  // namespace fragscope::snapshot

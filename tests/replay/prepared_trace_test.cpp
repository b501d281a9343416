// Compiling a trace into ops, on small hand-built snapshots (one rule per test).

#include "replay/prepared_trace.h"

#include <vector>

#include <gtest/gtest.h>

#include "util/error.h"

namespace fragscope::replay {
namespace {

using snapshot::TraceAction;
constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kBase = 0x7f0000000000;

snapshot::TraceEvent event(TraceAction action, std::uint64_t addr, std::uint64_t size,
                           std::uint64_t stream = 0) {
  snapshot::TraceEvent e;
  e.action = action;
  e.addr = addr;
  e.size = size;
  e.stream = stream;
  return e;
}

snapshot::Snapshot with_trace(snapshot::TraceEventList trace) {
  snapshot::Snapshot s;
  s.device_traces.push_back(std::move(trace));
  return s;
}

std::vector<OpKind> kinds(const PreparedTrace& t) {
  std::vector<OpKind> out;
  for (const Op& op : t.ops) out.push_back(op.kind);
  return out;
}

TEST(PreparedTraceTest, FreeRequestedThenFreeCompletedIsOnePlainFree) {
  const auto s = with_trace({event(TraceAction::kSegmentAlloc, kBase, 2 * kMiB),
                             event(TraceAction::kAlloc, kBase, 1000),
                             event(TraceAction::kFreeRequested, kBase, 1000),
                             event(TraceAction::kFreeCompleted, kBase, 1000)});
  const PreparedTrace t = prepare_trace(s, 0, "t");
  EXPECT_EQ(kinds(t), (std::vector<OpKind>{OpKind::kAlloc, OpKind::kFree}));
  EXPECT_EQ(t.ops[0].segment_end, 1u);  // the segment_alloc belongs to that malloc
  ASSERT_EQ(t.address_hints.size(), 1u);
  EXPECT_EQ(t.address_hints[0].address, kBase);
  EXPECT_EQ(t.ops[1].trace_index, 2u);
  EXPECT_EQ(t.recorded_peak_reserved, 2 * kMiB);
  EXPECT_FALSE(t.starts_mid_run);
}

TEST(PreparedTraceTest, EachMallocEventNamesItsOpAndNoOtherEventDoes) {
  const auto s = with_trace({event(TraceAction::kSegmentAlloc, kBase, 2 * kMiB),
                             event(TraceAction::kAlloc, kBase, 1000),
                             event(TraceAction::kAlloc, kBase + 1024, 1000),
                             event(TraceAction::kFreeRequested, kBase, 1000),
                             event(TraceAction::kFreeCompleted, kBase, 1000),
                             event(TraceAction::kOom, 0, 4 * kMiB)});
  const PreparedTrace t = prepare_trace(s, 0, "t");
  ASSERT_EQ(kinds(t), (std::vector<OpKind>{OpKind::kAlloc, OpKind::kAlloc, OpKind::kFree, OpKind::kOom}));
  EXPECT_EQ(malloc_op_of_event(t), (std::vector<std::uint32_t>{kNoOp, 0, 1, kNoOp, kNoOp, 3}));
}

TEST(PreparedTraceTest, ALaterFreeCompletedIsARecordStreamFree) {
  const auto s = with_trace({event(TraceAction::kSegmentAlloc, kBase, 2 * kMiB),
                             event(TraceAction::kAlloc, kBase, 1000),
                             event(TraceAction::kFreeRequested, kBase, 1000),
                             event(TraceAction::kAlloc, kBase + 1024, 1000),
                             event(TraceAction::kFreeCompleted, kBase, 1000)});
  const PreparedTrace t = prepare_trace(s, 0, "t");
  EXPECT_EQ(kinds(t), (std::vector<OpKind>{OpKind::kAlloc, OpKind::kFreeRequested, OpKind::kAlloc,
                                           OpKind::kFreeCompleted}));
  EXPECT_EQ(t.ops[1].slot, t.ops[3].slot);
  EXPECT_NE(t.ops[0].slot, t.ops[2].slot);  // still pending: its slot is not reused yet
}

TEST(PreparedTraceTest, SlotsAreReusedSoMemoryFollowsLiveBlocks) {
  snapshot::TraceEventList trace{event(TraceAction::kSegmentAlloc, kBase, 2 * kMiB)};
  for (int i = 0; i < 100; ++i) {
    trace.push_back(event(TraceAction::kAlloc, kBase, 512));
    trace.push_back(event(TraceAction::kFreeRequested, kBase, 512));
    trace.push_back(event(TraceAction::kFreeCompleted, kBase, 512));
  }
  const PreparedTrace t = prepare_trace(with_trace(trace), 0, "t");
  EXPECT_EQ(t.ops.size(), 200u);
  EXPECT_EQ(t.slot_count, 1u);
}

TEST(PreparedTraceTest, ReleaseBurstInsideAMallocBoundsTheCapacity) {
  const auto s = with_trace({event(TraceAction::kSegmentAlloc, kBase, 20 * kMiB),
                             event(TraceAction::kAlloc, kBase, 20 * kMiB),
                             event(TraceAction::kFreeRequested, kBase, 20 * kMiB),
                             event(TraceAction::kFreeCompleted, kBase, 20 * kMiB),
                             event(TraceAction::kSegmentFree, kBase, 20 * kMiB),
                             event(TraceAction::kSegmentAlloc, kBase + 64 * kMiB, 40 * kMiB),
                             event(TraceAction::kAlloc, kBase + 64 * kMiB, 40 * kMiB)});
  const PreparedTrace t = prepare_trace(s, 0, "t");
  EXPECT_EQ(kinds(t), (std::vector<OpKind>{OpKind::kAlloc, OpKind::kFree, OpKind::kAlloc}));
  EXPECT_EQ(t.capacity.release_bursts, 1u);
  ASSERT_TRUE(t.capacity.failed_at);
  EXPECT_EQ(*t.capacity.failed_at, 60 * kMiB);  // 20 MiB held + 40 MiB asked: refused
  EXPECT_EQ(t.capacity.lower_bound, 40 * kMiB);
  EXPECT_EQ(t.recorded_final_reserved, 40 * kMiB);
}

TEST(PreparedTraceTest, SegmentsReleasedOutsideAMallocAreAnEmptyCache) {
  const auto s = with_trace({event(TraceAction::kSegmentAlloc, kBase, 20 * kMiB),
                             event(TraceAction::kAlloc, kBase, 20 * kMiB),
                             event(TraceAction::kFreeRequested, kBase, 20 * kMiB),
                             event(TraceAction::kFreeCompleted, kBase, 20 * kMiB),
                             event(TraceAction::kSegmentFree, kBase, 20 * kMiB),
                             event(TraceAction::kSnapshot, 0, 0)});
  const PreparedTrace t = prepare_trace(s, 0, "t");
  EXPECT_EQ(kinds(t), (std::vector<OpKind>{OpKind::kAlloc, OpKind::kFree, OpKind::kEmptyCache}));
  EXPECT_FALSE(t.capacity.failed_at);
}

/// A stack of C++ frames as PyTorch records them (stacks="all"), innermost first.
snapshot::StackId cpp_stack(snapshot::Snapshot& s, const std::vector<std::string>& names) {
  std::vector<snapshot::FrameId> frames;
  for (const std::string& name : names) {
    frames.push_back(s.stacks.intern_frame({s.strings.intern("CUDACachingAllocator.cpp"), s.strings.intern(name), 0}));
  }
  return s.stacks.intern_stack(frames);
}

const std::vector<std::string> kEmptyCacheFrames = {
    "torch::unwind::unwind()", "torch::CapturedTraceback::gather(bool, bool, bool)",
    "torch::cuda::(anonymous namespace)::gather_with_cpp()",
    "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::emptyCache(std::pair<unsigned long long, "
    "unsigned long long>)",
    "at::native::(anonymous namespace)::run_single_conv(...)"};
const std::vector<std::string> kMallocFrames = {
    "torch::unwind::unwind()", "torch::CapturedTraceback::gather(bool, bool, bool)",
    "torch::cuda::(anonymous namespace)::gather_with_cpp()",
    "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long, CUstream_st*)"};

/// 20 MiB allocated and freed, its segment released with `stack`, then a 40 MiB malloc.
snapshot::Snapshot release_then_malloc(const std::vector<std::string>& release_frames) {
  snapshot::Snapshot s = with_trace({event(TraceAction::kSegmentAlloc, kBase, 20 * kMiB),
                                     event(TraceAction::kAlloc, kBase, 20 * kMiB),
                                     event(TraceAction::kFreeRequested, kBase, 20 * kMiB),
                                     event(TraceAction::kFreeCompleted, kBase, 20 * kMiB),
                                     event(TraceAction::kSegmentFree, kBase, 20 * kMiB),
                                     event(TraceAction::kSegmentAlloc, kBase + 64 * kMiB, 40 * kMiB),
                                     event(TraceAction::kAlloc, kBase + 64 * kMiB, 40 * kMiB)});
  if (!release_frames.empty()) s.device_traces[0][4].stack = cpp_stack(s, release_frames);
  return s;
}

TEST(PreparedTraceTest, AReleaseWhoseStackIsEmptyCacheIsAFlushEvenBeforeACudaMalloc) {
  // cuDNN's benchmark calls emptyCache() and then allocates: not a failed cudaMalloc.
  const PreparedTrace t = prepare_trace(release_then_malloc(kEmptyCacheFrames), 0, "t");
  EXPECT_EQ(kinds(t), (std::vector<OpKind>{OpKind::kAlloc, OpKind::kFree, OpKind::kEmptyCache, OpKind::kAlloc}));
  EXPECT_EQ(t.ops[2].trace_index, 4u);
  EXPECT_EQ(t.ops[2].segment_end, 2u);  // the flush owns the segment_free, the malloc its segment_alloc
  EXPECT_EQ(t.ops[3].segment_end, 3u);
  EXPECT_EQ(t.flushes, 1u);
  EXPECT_FALSE(t.capacity.failed_at);  // no cudaMalloc failed
  EXPECT_EQ(t.capacity.release_bursts, 0u);
}

TEST(PreparedTraceTest, AReleaseInsideMallocOrWithoutStackBeforeACudaMallocIsAFailedCudaMalloc) {
  for (const auto& frames : {kMallocFrames, std::vector<std::string>{}}) {
    const PreparedTrace t = prepare_trace(release_then_malloc(frames), 0, "t");
    EXPECT_EQ(kinds(t), (std::vector<OpKind>{OpKind::kAlloc, OpKind::kFree, OpKind::kAlloc}));
    EXPECT_EQ(t.flushes, 0u);
    ASSERT_TRUE(t.capacity.failed_at);
    EXPECT_EQ(*t.capacity.failed_at, 60 * kMiB);
  }
}

TEST(PreparedTraceTest, AReleaseFollowedByACachedBlockIsAFlush) {
  // A malloc's own release always ends in a cudaMalloc or an OOM: a block served from the cache
  // right after releases means they were an empty_cache() (a user's, between steps).
  const auto s = with_trace({event(TraceAction::kSegmentAlloc, kBase, 20 * kMiB),
                             event(TraceAction::kAlloc, kBase, 4 * kMiB),
                             event(TraceAction::kSegmentAlloc, kBase + 64 * kMiB, 20 * kMiB),
                             event(TraceAction::kAlloc, kBase + 64 * kMiB, 20 * kMiB),
                             event(TraceAction::kFreeRequested, kBase + 64 * kMiB, 20 * kMiB),
                             event(TraceAction::kFreeCompleted, kBase + 64 * kMiB, 20 * kMiB),
                             event(TraceAction::kSegmentFree, kBase + 64 * kMiB, 20 * kMiB),
                             event(TraceAction::kAlloc, kBase + 4 * kMiB, 4 * kMiB)});
  const PreparedTrace t = prepare_trace(s, 0, "t");
  EXPECT_EQ(kinds(t), (std::vector<OpKind>{OpKind::kAlloc, OpKind::kAlloc, OpKind::kFree, OpKind::kEmptyCache,
                                           OpKind::kAlloc}));
  EXPECT_EQ(t.flushes, 1u);
  EXPECT_FALSE(t.capacity.failed_at);
}

TEST(PreparedTraceTest, AnOomFollowedByAllocationsWasCaught) {
  // cuDNN's algorithm search catches OutOfMemoryError and goes on; the run died of the last one.
  const auto s = with_trace({event(TraceAction::kSegmentAlloc, kBase, 20 * kMiB),
                             event(TraceAction::kAlloc, kBase, 20 * kMiB),
                             event(TraceAction::kOom, 3 * kMiB, 30 * kMiB),
                             event(TraceAction::kFreeRequested, kBase, 20 * kMiB),
                             event(TraceAction::kFreeCompleted, kBase, 20 * kMiB),
                             event(TraceAction::kAlloc, kBase, 10 * kMiB),
                             event(TraceAction::kOom, 3 * kMiB, 40 * kMiB),
                             event(TraceAction::kFreeRequested, kBase, 10 * kMiB),
                             event(TraceAction::kFreeCompleted, kBase, 10 * kMiB)});
  const PreparedTrace t = prepare_trace(s, 0, "t");
  EXPECT_EQ(kinds(t), (std::vector<OpKind>{OpKind::kAlloc, OpKind::kCaughtOom, OpKind::kFree, OpKind::kAlloc,
                                           OpKind::kOom, OpKind::kFree}));
  ASSERT_EQ(t.ooms.size(), 2u);
  EXPECT_TRUE(t.ooms[0].caught);
  EXPECT_FALSE(t.ooms[1].caught);
}

TEST(PreparedTraceTest, AnOomFollowedByAnotherOomWasCaughtWithNoAllocationBetween) {
  // cuDNN tries workspace after workspace for one convolution, each refused, then runs one that
  // needs none; the next malloc fails for good. Only frees lie between them (the DCGAN tutorial,
  // tests/data/field/gan_lo): every OOM but the last was caught.
  const auto s = with_trace({event(TraceAction::kSegmentAlloc, kBase, 20 * kMiB),
                             event(TraceAction::kAlloc, kBase, 20 * kMiB),
                             event(TraceAction::kOom, 3 * kMiB, 60 * kMiB),
                             event(TraceAction::kOom, 3 * kMiB, 50 * kMiB),
                             event(TraceAction::kFreeRequested, kBase, 20 * kMiB),
                             event(TraceAction::kFreeCompleted, kBase, 20 * kMiB),
                             event(TraceAction::kOom, 3 * kMiB, 40 * kMiB)});
  const PreparedTrace t = prepare_trace(s, 0, "t");
  EXPECT_EQ(kinds(t), (std::vector<OpKind>{OpKind::kAlloc, OpKind::kCaughtOom, OpKind::kCaughtOom, OpKind::kFree,
                                           OpKind::kOom}));
  ASSERT_EQ(t.ooms.size(), 3u);
  EXPECT_TRUE(t.ooms[0].caught);
  EXPECT_TRUE(t.ooms[1].caught);
  EXPECT_FALSE(t.ooms[2].caught);
  ASSERT_NE(fatal_oom(t), nullptr);
  EXPECT_EQ(fatal_oom(t)->trace_index, 6u);
}

// The OOM observer dumped inside cuDNN's plan loop (tests/data/survived_oom/vid_edge): nothing follows the last
// `oom` entry, yet its frames run through at::native::run_conv_plan, whose callers catch it (survived_oom.h).
TEST(PreparedTraceTest, AnOomInsideCuDNNsPlanLoopIsCaughtWhereverTheTraceEnds) {
  auto s = with_trace({event(TraceAction::kSegmentAlloc, kBase, 20 * kMiB),
                       event(TraceAction::kAlloc, kBase, 20 * kMiB),
                       event(TraceAction::kOom, 3 * kMiB, 60 * kMiB)});
  const PreparedTrace fatal = prepare_trace(s, 0, "t");
  ASSERT_NE(fatal_oom(fatal), nullptr);
  const snapshot::FrameId runner = s.stacks.intern_frame(
      {s.strings.intern(""), s.strings.intern("at::native::run_conv_plan(cudnnContext*, at::Tensor const&)"), 0});
  s.device_traces[0].back().stack = s.stacks.intern_stack(std::vector<snapshot::FrameId>{runner});
  const PreparedTrace t = prepare_trace(s, 0, "t");
  EXPECT_EQ(kinds(t), (std::vector<OpKind>{OpKind::kAlloc, OpKind::kCaughtOom}));
  ASSERT_EQ(t.ooms.size(), 1u);
  EXPECT_TRUE(t.ooms[0].caught);
  EXPECT_EQ(fatal_oom(t), nullptr);
  // The run's log said cuDNN found no plan: the refusal was the run's end.
  const PreparedTrace no_plan = prepare_trace(s, 0, "t", snapshot::RunEnd::kCudnnFoundNoPlan);
  EXPECT_EQ(kinds(no_plan), (std::vector<OpKind>{OpKind::kAlloc, OpKind::kOom}));
  ASSERT_NE(fatal_oom(no_plan), nullptr);
}

// A malloc whose frames run through ATen's plan loop is elastic (a refused workspace is replaced by a smaller
// plan's); the same frames under another function, or none, are not.
TEST(PreparedTraceTest, AMallocInsideCuDNNsPlanLoopIsElastic) {
  auto s = with_trace({event(TraceAction::kSegmentAlloc, kBase, 20 * kMiB),
                       event(TraceAction::kAlloc, kBase, 2 * kMiB),
                       event(TraceAction::kAlloc, kBase + 2 * kMiB, 4 * kMiB),
                       event(TraceAction::kAlloc, kBase + 6 * kMiB, 4 * kMiB)});
  const auto frame = [&](const char* name) {
    return s.stacks.intern_frame({s.strings.intern(""), s.strings.intern(name), 0});
  };
  s.device_traces[0][2].stack = s.stacks.intern_stack(std::vector<snapshot::FrameId>{
      frame("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)"),
      frame("at::native::run_conv_plan(cudnnContext*, at::Tensor const&)"),
      frame("at::native::try_configs(std::vector<...> const&)")});
  s.device_traces[0][3].stack = s.stacks.intern_stack(std::vector<snapshot::FrameId>{
      frame("at::native::cudnn_convolution(at::Tensor const&, at::Tensor const&)")});
  const PreparedTrace t = prepare_trace(s, 0, "t");
  ASSERT_EQ(t.ops.size(), 3u);
  EXPECT_FALSE(t.ops[0].elastic);
  EXPECT_TRUE(t.ops[1].elastic);
  EXPECT_FALSE(t.ops[2].elastic);
  EXPECT_TRUE(has_elastic_allocs(t));
}

TEST(PreparedTraceTest, OneCapacityStretchWhileOneNumberExplainsTheDriver) {
  // A cudaMalloc of 40 MiB refused with 20 MiB held (60 MiB), then 40 MiB served after the
  // release: one capacity in [40, 60) MiB explains both.
  const PreparedTrace t = prepare_trace(release_then_malloc({}), 0, "t");
  ASSERT_EQ(t.capacity.pieces.size(), 1u);
  EXPECT_EQ(t.capacity.pieces[0].lower, 40 * kMiB);
  EXPECT_EQ(t.capacity.pieces[0].upper, 60 * kMiB);
  EXPECT_EQ(t.capacity.pieces[0].upper_trace_index, 5u);
}

TEST(PreparedTraceTest, ServedAboveAnEarlierRefusalStartsANewCapacityStretch) {
  // Refused at 60 MiB (the release's stack is the malloc's); later 70 MiB are served: memory outside the
  // allocator was given back.
  auto s = release_then_malloc(kMallocFrames);
  s.device_traces[0].push_back(event(TraceAction::kSegmentAlloc, kBase + 128 * kMiB, 30 * kMiB));
  s.device_traces[0].push_back(event(TraceAction::kAlloc, kBase + 128 * kMiB, 30 * kMiB));
  const PreparedTrace t = prepare_trace(s, 0, "t");
  ASSERT_EQ(t.capacity.pieces.size(), 2u);
  EXPECT_EQ(t.capacity.pieces[1].first_trace_index, 7u);
  EXPECT_EQ(t.capacity.pieces[1].lower, 70 * kMiB);
  EXPECT_FALSE(t.capacity.pieces[1].upper);
}

// Releases without a stack (a trace recorded with context="alloc"; field lit_edge stripped of its stacks,
// where Lightning's setup flushes the cache), then a cudaMalloc that one capacity would have refused, had
// the trace not held more later. Taken as a refusal, it made a 312 MB capacity stretch and the doctor's
// verdict wrong.
TEST(PreparedTraceTest, AReleaseWithoutStackIsAFlushWhenTheTraceLaterHoldsMore) {
  auto s = release_then_malloc({});
  s.device_traces[0].push_back(event(TraceAction::kSegmentAlloc, kBase + 128 * kMiB, 30 * kMiB));
  s.device_traces[0].push_back(event(TraceAction::kAlloc, kBase + 128 * kMiB, 30 * kMiB));
  const PreparedTrace t = prepare_trace(s, 0, "t");
  EXPECT_EQ(t.flushes, 1u);
  EXPECT_FALSE(t.capacity.failed_at);
  ASSERT_EQ(t.capacity.pieces.size(), 1u);
  EXPECT_EQ(t.capacity.pieces[0].lower, 70 * kMiB);
  EXPECT_FALSE(t.capacity.pieces[0].upper);
}

TEST(PreparedTraceTest, OomEntriesAreRecordedWithTheReservedBytes) {
  const auto s = with_trace({event(TraceAction::kSegmentAlloc, kBase, 20 * kMiB),
                             event(TraceAction::kAlloc, kBase, 20 * kMiB),
                             event(TraceAction::kOom, 3 * kMiB, 30 * kMiB)});
  const PreparedTrace t = prepare_trace(s, 0, "t");
  ASSERT_EQ(t.ooms.size(), 1u);
  EXPECT_EQ(t.ooms[0].trace_index, 2u);
  EXPECT_EQ(t.ooms[0].device_free, 3 * kMiB);
  EXPECT_EQ(t.ooms[0].reserved_at_oom, 20 * kMiB);
  EXPECT_EQ(t.ops.back().kind, OpKind::kOom);
}

TEST(PreparedTraceTest, MidRunStateIsWalkedBackFromTheEndState) {
  // End state: one 20 MiB segment; [0, 5) MiB allocated in the trace, [5, 20) free, and a
  // second segment whose only block the trace never touches.
  snapshot::Snapshot s;
  snapshot::Segment seg;
  seg.address = kBase;
  seg.total_size = 20 * kMiB;
  seg.first_block = 0;
  seg.block_count = 2;
  s.segments.push_back(seg);
  s.blocks.push_back({kBase, 5 * kMiB, 5 * kMiB, snapshot::BlockState::kActiveAllocated, 0});
  s.blocks.push_back({kBase + 5 * kMiB, 15 * kMiB, 0, snapshot::BlockState::kInactive, 0});
  snapshot::Segment other = seg;
  other.address = kBase + 64 * kMiB;
  other.first_block = 2;
  other.block_count = 1;
  s.segments.push_back(other);
  s.blocks.push_back({other.address, 20 * kMiB, 19 * kMiB, snapshot::BlockState::kActiveAllocated, 0});
  // The trace frees a block allocated before it (14.5 MiB asked) and then allocates [0, 5).
  s.device_traces.push_back({event(TraceAction::kFreeRequested, kBase + 5 * kMiB, 14 * kMiB + kMiB / 2),
                             event(TraceAction::kFreeCompleted, kBase + 5 * kMiB, 14 * kMiB + kMiB / 2),
                             event(TraceAction::kAlloc, kBase, 5 * kMiB)});
  const PreparedTrace t = prepare_trace(s, 0, "t");
  EXPECT_TRUE(t.starts_mid_run);
  EXPECT_EQ(t.recorded_initial_reserved, 40 * kMiB);
  ASSERT_EQ(t.initial_segments.size(), 2u);
  ASSERT_EQ(t.initial_segments[0].live_blocks.size(), 1u);
  const alloc::InitialBlock& b = t.initial_segments[0].live_blocks[0];
  EXPECT_EQ(b.address, kBase + 5 * kMiB);
  // 14.5 MiB rounds to 14.5 MiB; the 0.5 MiB behind it could never have been split off.
  EXPECT_EQ(b.size, 15 * kMiB);
  ASSERT_EQ(t.initial_segments[1].live_blocks.size(), 1u);
  EXPECT_EQ(t.initial_segments[1].live_blocks[0].size, 20 * kMiB);  // untouched: exact
  EXPECT_EQ(t.initial_slots.size(), 2u);
  EXPECT_EQ(kinds(t), (std::vector<OpKind>{OpKind::kFree, OpKind::kAlloc}));
}

TEST(PreparedTraceTest, EventsThatFitNoLiveBlockAreCountedAndSkipped) {
  const auto s = with_trace({event(TraceAction::kFreeCompleted, kBase, 1000),
                             event(TraceAction::kFreeRequested, kBase + 4096, 1000)});
  // A free of a block nobody allocated and that no segment holds: a ring-buffer edge.
  const PreparedTrace t = prepare_trace(s, 0, "t");
  EXPECT_GE(t.anomalies, 1u);
}

TEST(PreparedTraceTest, RefusesAddressesNoAllocatorProduces) {
  // Not 512-aligned, or beyond the 48-bit address space: a corrupt or hostile file.
  for (std::uint64_t address : {kBase + 100ull, 1ull << 60}) {
    const auto s = with_trace({event(TraceAction::kSegmentAlloc, address, 2 * kMiB)});
    try {
      prepare_trace(s, 0, "bad.pickle");
      ADD_FAILURE() << "accepted " << address;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("bad.pickle: trace event 0", 0), 0u) << e.what();
    }
  }
}

// Issue 16: a 290 KB file whose trace allocated on 60,000 streams made one replay hold 1.4 GB
// (two 24 KiB free-block sets per stream) and, under expandable segments, end in an internal error.
TEST(PreparedTraceTest, RefusesMoreStreamsOrPoolsThanAProcessHas) {
  const auto message = [](const snapshot::Snapshot& s) -> std::string {
    try {
      prepare_trace(s, 0, "streams.pickle");
    } catch (const InputError& e) {
      return e.what();
    }
    return "(accepted)";
  };
  snapshot::TraceEventList named;  // frees on many streams: names them, allocates on none
  for (std::uint64_t i = 0; i <= kMaxTraceStreams; ++i)
    named.push_back(event(TraceAction::kFreeCompleted, kBase + i * 512, 512, i + 1));
  EXPECT_EQ(message(with_trace(named)), "streams.pickle: the trace of device 0 names 1025 CUDA streams (at most "
                                        "1024); no recording of a training process names that many");
  snapshot::TraceEventList allocating;
  for (std::uint64_t i = 0; i <= kMaxAllocatingPools; ++i)
    allocating.push_back(event(TraceAction::kAlloc, kBase + i * 2 * kMiB, 512, i + 1));
  EXPECT_EQ(message(with_trace(allocating)),
            "streams.pickle: the trace allocates from 257 (memory pool, stream) pairs; more than 256 is no recording "
            "of a training process");
  allocating.pop_back();  // at the limit: compiled
  EXPECT_EQ(prepare_trace(with_trace(allocating), 0, "t").streams.size(), kMaxAllocatingPools + 1);
}

TEST(PreparedTraceTest, RefusesASnapshotWithoutATrace) {
  snapshot::Snapshot s;
  EXPECT_THROW(prepare_trace(s, 0, "empty.pickle"), InputError);
}

}  // namespace
}  // namespace fragscope::replay

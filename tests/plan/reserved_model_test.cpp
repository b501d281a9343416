#include "plan/reserved_model.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "alloc/alloc_config.h"
#include "alloc/size_rules.h"
#include "plan/training_program.h"
#include "recorded_run.h"
#include "util/bytes.h"

namespace fragscope::plan {
namespace {

namespace fs = std::filesystem;
using testing::load_recorded_run;
using testing::RecordedRun;

const fs::path kFixtures = FRAGSCOPE_FIXTURES_DIR;
const fs::path kRecorded = fs::path(FRAGSCOPE_SOURCE_DIR) / "tests/data/plan";
const fs::path kHeldOut = fs::path(FRAGSCOPE_SOURCE_DIR) / "tests/data/heldout";
constexpr std::uint64_t kH200Total = 150109880320;  // cudaMemGetInfo's total in every fixture

double relative_error(std::uint64_t predicted, std::uint64_t measured) {
  return (static_cast<double>(predicted) - static_cast<double>(measured)) / static_cast<double>(measured);
}

ReplayedRun replay(const RecordedRun& run, std::optional<std::uint64_t> capacity = std::nullopt) {
  return replay_program(build_training_program(run.spec, run.schedule), alloc::parse_alloc_conf(run.alloc_conf),
                        capacity, kH200Total);
}

/// max_memory_reserved() once micro-step `k` is over, from the run's rises.
std::uint64_t reserved_after(const ReplayedRun& r, std::uint32_t k) {
  std::uint64_t bytes = 0;
  for (const ReservedRise& rise : r.reserved_rises)
    if (rise.micro_step <= k) bytes = rise.bytes;
  return bytes;
}

void expect_close(const RecordedRun& run, const ReplayedRun& r, double tolerance) {
  EXPECT_LT(std::abs(relative_error(r.peak_allocated_bytes, run.max_memory_allocated)), 0.01)
      << run.name << ": allocated " << r.peak_allocated_bytes << " measured " << run.max_memory_allocated;
  EXPECT_LT(std::abs(relative_error(r.peak_reserved_bytes, run.max_memory_reserved)), tolerance)
      << run.name << ": reserved " << r.peak_reserved_bytes << " measured " << run.max_memory_reserved;
}

TEST(ReservedModel, TheTenMeasuredShapesWithinOnePercentOfReserved) {
  // docs/PLAN_ACCURACY.md: the issue asks for 3%; every shape replays within 0.03%.
  for (const fs::path& dir :
       {kFixtures / "plan_p1", kFixtures / "plan_p2", kRecorded / "p3", kRecorded / "p4", kRecorded / "p5",
        kRecorded / "p6", kRecorded / "p7", kRecorded / "p8", kRecorded / "p9", kRecorded / "p10"}) {
    const RecordedRun run = load_recorded_run(dir);
    const ReplayedRun r = replay(run);
    expect_close(run, r, 0.01);
    EXPECT_EQ(r.num_alloc_retries, 0u) << run.name;
  }
}

TEST(ReservedModel, EveryMicroStepOfPlanP1ReservesWhatTheRunReserved) {
  // steps.jsonl: reserved_bytes.all.peak after each micro-step (24.97, 29.10, 32.89, 36.43 GiB).
  const RecordedRun run = load_recorded_run(kFixtures / "plan_p1");
  const ReplayedRun r = replay(run);
  const std::uint64_t measured[] = {26807894016, 31247564800, 35311845376, 39113981952};
  for (std::uint32_t k = 0; k < 4; ++k) EXPECT_EQ(reserved_after(r, k), measured[k]) << "micro-step " << k;
  EXPECT_EQ(r.reserved_rises.size(), 4u);  // one per micro-step that rose
}

TEST(ReservedModel, VariableLengthsAndAllocatorSettingsWithinOnePercent) {
  // The same lengths under the default allocator, expandable segments and max_split_size 128:
  // 49.23, 40.04 and 81.23 GiB reserved for the same tensors.
  for (const char* name : {"calib", "fid_default", "big", "fsdp_default", "fid_expandable", "fid_msplit128",
                           "fsdp_expandable", "calib_eval"}) {
    const RecordedRun run = load_recorded_run(kFixtures / name);
    expect_close(run, replay(run), 0.01);
  }
}

// tests/data/plan/q_*, h_* (record_levers.py): one lever each, and three runs of several
// levers that were kept out of the fixes (h_b) or measured the chunked loss (h_a, h_c).
constexpr const char* kLeverRuns[] = {"q_fused", "q_single", "q_sgd", "q_bf16", "q_fp32", "q_nocache", "q_ckpt4",
                                      "q_ckpt4_nc", "q_fused_exp", "q_var", "q_var_exp", "h_a", "h_b", "h_c"};

TEST(ReservedModel, TheLeversMeasuredOnTheH200WithinAFifthOfAPercent) {
  // docs/PLAN_ACCURACY.md: fused, single-tensor AdamW, SGD, bf16 and fp32 precision, use_cache
  // off, 4 of 8 blocks checkpointed, a chunked loss, variable lengths, expandable segments:
  // reserved within 0.12 %, allocated within 0.03 % (the issue asks for 3 % and 2 %).
  for (const char* name : kLeverRuns) {
    const RecordedRun run = load_recorded_run(kRecorded / name);
    const ReplayedRun r = replay(run);
    EXPECT_LT(std::abs(relative_error(r.peak_allocated_bytes, run.max_memory_allocated)), 0.001)
        << name << ": allocated " << r.peak_allocated_bytes << " measured " << run.max_memory_allocated;
    EXPECT_LT(std::abs(relative_error(r.peak_reserved_bytes, run.max_memory_reserved)), 0.002)
        << name << ": reserved " << r.peak_reserved_bytes << " measured " << run.max_memory_reserved;
    EXPECT_EQ(r.num_alloc_retries, 0u) << name;
  }
}

TEST(ReservedModel, AChunkedLossReservesWhatTheRunsReservedMicroStepByMicroStep) {
  // h_a: pure bf16, chunks of 2048 of 8192 tokens; h_c: autocast, one chunk. lm_head's weight
  // gradient sums in the engine's buffer across chunks (+501 MiB while .grad exists), and the
  // autograd thread's cuBLAS workspace comes with the first chunk's recomputation.
  for (const char* name : {"h_a", "h_c"}) {
    const RecordedRun run = load_recorded_run(kRecorded / name);
    const ReplayedRun r = replay(run);
    std::ifstream steps(kRecorded / name / "steps.jsonl");
    std::uint32_t k = 0;
    for (std::string line; std::getline(steps, line); ++k) {
      EXPECT_EQ(reserved_after(r, k), nlohmann::json::parse(line).at("reserved_bytes.all.peak").get<std::uint64_t>())
          << name << " micro-step " << k;
    }
    EXPECT_EQ(k, run.seq_lens.size()) << name;
  }
}

TEST(ReservedModel, HeldOutRunsRunOutOfMemoryWhereTheyDid) {
  // Recordings shrunk to a budget (tests/data/heldout, and eval_spike): with the capacity their
  // OOM message gives, the replay fails in the same micro-step asking for the same bytes, or
  // survives where the run survived.
  std::vector<RecordedRun> runs;
  for (const char* name :
       {"A_mid", "B_frag", "C_frag", "E_1.02", "E_1.06", "E_eval", "F7_frag", "S_exp_round2", "cap", "eval", "frag"})
    runs.push_back(load_recorded_run(kHeldOut / name));
  runs.push_back(load_recorded_run(kFixtures / "eval_spike"));
  for (const auto& run : runs) {
    ASSERT_TRUE(run.oom && run.capacity) << run.name;
    const ReplayedRun r = replay(run, run.capacity);
    ASSERT_TRUE(r.oom) << run.name;
    EXPECT_EQ(r.oom_at.micro_step, run.oom_step) << run.name;
    EXPECT_EQ(r.oom_at.phase == ProgramPhase::kEval, run.oom_phase == "eval") << run.name;
    // the message states what cudaMalloc was asked for: the request rounded to its segment
    const alloc::AllocConfig config = alloc::parse_alloc_conf(run.alloc_conf);
    const std::uint64_t segment = alloc::allocation_size(alloc::round_size(r.oom_request_bytes, config), config);
    EXPECT_LT(std::abs(relative_error(segment, run.oom_request)), 0.005) << run.name;
  }
  const RecordedRun spike = load_recorded_run(kFixtures / "eval_spike");
  EXPECT_EQ(replay(spike, spike.capacity).num_alloc_retries, spike.num_alloc_retries);  // 2
}

TEST(ReservedModel, TheBreakdownAddsUpToTheRequestedPeak) {
  const RecordedRun run = load_recorded_run(kFixtures / "plan_p1");
  const ReplayedRun r = replay(run);
  std::uint64_t sum = 0;
  for (std::uint64_t b : r.breakdown) sum += b;
  EXPECT_LE(sum, r.peak_allocated_bytes);  // allocated counts blocks rounded to 512 B
  EXPECT_GT(static_cast<double>(sum), 0.999 * static_cast<double>(r.peak_allocated_bytes));
  const std::uint64_t P = 953223168;
  EXPECT_EQ(r.breakdown[static_cast<int>(MemoryRole::kParameters)], 4 * P);
  EXPECT_EQ(r.breakdown[static_cast<int>(MemoryRole::kOptimizerState)], 8 * P);
  EXPECT_EQ(r.breakdown[static_cast<int>(MemoryRole::kGradients)], 4 * P);
  // HF's DynamicCache during training: fp32 k and v, 16 layers × 8192 tokens × 2 × 8 KiB.
  EXPECT_EQ(r.breakdown[static_cast<int>(MemoryRole::kKvCache)], 16ull * 8192 * 2 * 2048 * 4);
}

TEST(ReservedModel, CapacityBelowThePeakMakesTheAllocatorRetryOrFail) {
  const RecordedRun run = load_recorded_run(kFixtures / "plan_p1");
  const ReplayedRun free_run = replay(run);
  EXPECT_FALSE(free_run.oom);
  const ReplayedRun tight = replay(run, free_run.peak_allocated_bytes - 1);
  EXPECT_TRUE(tight.oom);
  const ReplayedRun squeezed = replay(run, free_run.peak_reserved_bytes - 100 * kMiB);
  EXPECT_FALSE(squeezed.oom);
  EXPECT_GT(squeezed.num_alloc_retries, 0u);  // it fits only by flushing the cache
}

}  // namespace
}  // namespace fragscope::plan

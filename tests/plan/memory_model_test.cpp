#include "plan/memory_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "plan/job_spec.h"
#include "recorded_run.h"

namespace fragscope::plan {
namespace {

namespace fs = std::filesystem;
using testing::load_recorded_run;
using testing::RecordedRun;

const fs::path kFixtures = FRAGSCOPE_FIXTURES_DIR;
const fs::path kRecorded = fs::path(FRAGSCOPE_SOURCE_DIR) / "tests/data/plan";

double relative_error(std::uint64_t predicted, std::uint64_t measured) {
  return (static_cast<double>(predicted) - static_cast<double>(measured)) / static_cast<double>(measured);
}

/// Every recorded run with its own measured peak: the plan fixtures and the shapes
/// recorded on the H200 for calibration (tests/data/plan/README.md lists their arguments).
std::vector<RecordedRun> all_runs() {
  std::vector<RecordedRun> runs;
  for (const char* name : {"plan_p1", "plan_p2", "calib", "fid_default", "big", "fsdp_default"})
    runs.push_back(load_recorded_run(kFixtures / name));
  for (const char* name : {"p3", "p4", "p5", "p6", "p7", "p8", "p9", "p10"}) runs.push_back(load_recorded_run(kRecorded / name));
  return runs;
}

TEST(MemoryModel, ParameterCountMatchesTheRecordedModels) {
  for (const auto& run : all_runs()) {
    if (run.params) {
      EXPECT_EQ(run.spec.model.parameters(), run.params) << run.name;
    }
  }
}

TEST(MemoryModel, PlanFixturesPeakAllocatedWithinOnePercent) {
  // The acceptance: within 10% of max_memory_allocated (plan_p1 34.59 GiB, plan_p2 19.58 GiB).
  for (const char* name : {"plan_p1", "plan_p2"}) {
    const RecordedRun run = load_recorded_run(kFixtures / name);
    const MemoryEstimate e = estimate_memory(run.spec);
    EXPECT_LT(std::abs(relative_error(e.peak_allocated_bytes, run.max_memory_allocated)), 0.01)
        << name << " predicted " << e.peak_allocated_bytes << " measured " << run.max_memory_allocated;
  }
}

TEST(MemoryModel, EveryRecordedRunWithinTwoPercentStepByStep) {
  for (const auto& run : all_runs()) {
    const auto peaks = simulate_micro_steps(run.spec, run.seq_lens);
    const std::uint64_t predicted = *std::max_element(peaks.begin(), peaks.end());
    EXPECT_LT(std::abs(relative_error(predicted, run.max_memory_allocated)), 0.02)
        << run.name << " predicted " << predicted << " measured " << run.max_memory_allocated;
  }
}

TEST(MemoryModel, ShippedJobSpecsOfTheRecordedShapesPredictTheirPeaks) {
  // tests/data/plan/*/job.toml are the recorded runs as `fragscope plan` specs
  // (docs/PLAN_ACCURACY.md is made from them).
  for (const char* name : {"p3", "p4", "p5", "p6", "p7", "p8", "p9", "p10"}) {
    const RecordedRun run = load_recorded_run(kRecorded / name);
    const MemoryEstimate e = estimate_memory(read_job_spec(kRecorded / name / "job.toml"));
    EXPECT_EQ(e.peak_allocated_bytes, estimate_memory(run.spec).peak_allocated_bytes) << name;
    EXPECT_LT(std::abs(relative_error(e.peak_allocated_bytes, run.max_memory_allocated)), 0.02) << name;
  }
}

TEST(MemoryModel, VariableLengthWorstCaseIsWhatALongRunReaches) {
  // `plan` sizes a variable-length job for a longest micro-step with gradients and AdamW state:
  // calib's 32 steps never met that (38.33 GiB), big's 160 did (step 51, 4096 tokens: 53.27 GiB).
  const RecordedRun big = load_recorded_run(kFixtures / "big");
  const RecordedRun calib = load_recorded_run(kFixtures / "calib");
  const MemoryEstimate e = estimate_memory(big.spec);
  EXPECT_LT(std::abs(relative_error(e.peak_allocated_bytes, big.max_memory_allocated)), 0.001);
  EXPECT_GT(e.peak_allocated_bytes, calib.max_memory_allocated);
  EXPECT_EQ(e.headroom_fraction, 0.32);
  EXPECT_GE(e.peak_reserved_bytes, big.max_memory_reserved);
}

TEST(MemoryModel, SteadyStateEqualsTheLastStepOfFixedLengthRuns) {
  // With fixed lengths the last micro-step (grads kept, AdamW state present) is the steady state.
  for (const auto& run : all_runs()) {
    if (run.spec.training.variable_length) continue;
    const auto peaks = simulate_micro_steps(run.spec, run.seq_lens);
    EXPECT_EQ(estimate_memory(run.spec).peak_allocated_bytes, *std::max_element(peaks.begin(), peaks.end()))
        << run.name;
  }
}

TEST(MemoryModel, PlanP1PeakIsTheLossForwardAndItsPartsAddUp) {
  const RecordedRun run = load_recorded_run(kFixtures / "plan_p1");
  const MemoryEstimate e = estimate_memory(run.spec);
  EXPECT_EQ(e.peak.phase, "forward (loss)");
  const std::uint64_t P = 953223168;
  EXPECT_EQ(e.peak.item("parameters"), 4 * P);
  EXPECT_EQ(e.peak.item("gradients"), 4 * P);  // grad_accum 2 keeps .grad between micro-steps
  EXPECT_EQ(e.peak.item("optimizer_state"), 8 * P);
  // HF's DynamicCache during training: fp32 k and v, 16 layers × 8192 tokens × 2 × 8 KiB.
  EXPECT_EQ(e.peak.item("kv_cache"), 16ull * 8192 * 2 * 2048 * 4);
  // bf16 logits + fp32 upcast + log_softmax: 10 B × 32000 × 8192.
  EXPECT_EQ(e.peak.item("logits_and_loss"), 10ull * 32000 * 8192);
  std::uint64_t sum = 0;
  for (const auto& item : e.peak.items) sum += item.bytes;
  EXPECT_EQ(sum, e.peak_allocated_bytes);
}

TEST(MemoryModel, CheckpointingMovesThePeakAndShrinksActivations) {
  const RecordedRun p1 = load_recorded_run(kFixtures / "plan_p1");
  const RecordedRun p2 = load_recorded_run(kFixtures / "plan_p2");
  const MemoryEstimate a = estimate_memory(p1.spec), b = estimate_memory(p2.spec);
  EXPECT_LT(b.peak.item("activations") * 10, a.peak.item("activations"));
  EXPECT_EQ(b.peak.item("kv_cache"), 0u);  // transformers turns use_cache off with checkpointing
  // Measured: 34.59 → 19.58 GiB.
  EXPECT_NEAR(static_cast<double>(a.peak_allocated_bytes - b.peak_allocated_bytes),
              static_cast<double>(p1.max_memory_allocated - p2.max_memory_allocated), 0.01 * p1.max_memory_allocated);
}

TEST(MemoryModel, OptimizerStepIsTwentyBytesPerParameterUnderAmpAdamW) {
  // plan_p2 step 1: the first AdamW step peaks at 19131639296 B = 20 × P + two cuBLAS workspaces.
  const RecordedRun p2 = load_recorded_run(kFixtures / "plan_p2");
  const PhasePeak opt = optimizer_step_phase(p2.spec);
  EXPECT_EQ(opt.bytes, 20ull * 953223168 + 64ull * 1024 * 1024);
  EXPECT_LT(std::abs(relative_error(opt.bytes, 19131639296ull)), 1e-4);
}

TEST(MemoryModel, ReservedHeadroomCoversEveryRecordedRun) {
  // max_memory_reserved / max_memory_allocated peaked at 1.149 (fixed lengths, p6), 1.284
  // (variable lengths, calib) and 1.248 (fsdp_default); the headroom must cover them without
  // doubling the bill.
  for (const auto& run : all_runs()) {
    const auto peaks = simulate_micro_steps(run.spec, run.seq_lens);
    const double reserved =
        static_cast<double>(*std::max_element(peaks.begin(), peaks.end())) * (1 + allocator_headroom(run.spec));
    EXPECT_GE(reserved, static_cast<double>(run.max_memory_reserved)) << run.name;
    EXPECT_LT(reserved, 1.2 * static_cast<double>(run.max_memory_reserved)) << run.name;
  }
}

TEST(MemoryModel, ShardingDividesModelStateByWorldSize) {
  RecordedRun run = load_recorded_run(kRecorded / "p10");  // FSDP2 on one rank
  const MemoryEstimate one = estimate_memory(run.spec);
  run.spec.parallel.world_size = 8;
  const MemoryEstimate eight = estimate_memory(run.spec);
  const PhasePeak opt1 = optimizer_step_phase(load_recorded_run(kRecorded / "p10").spec);
  const PhasePeak opt8 = optimizer_step_phase(run.spec);
  EXPECT_EQ(opt8.item("optimizer_state") * 8, opt1.item("optimizer_state"));
  EXPECT_LT(eight.peak_allocated_bytes, one.peak_allocated_bytes);
  EXPECT_GT(eight.communication_bytes, 0u);
  EXPECT_EQ(one.communication_bytes, 0u);
}

TEST(MemoryModel, DeviceUsableMemoryComesFromTheCatalogue) {
  RecordedRun run = load_recorded_run(kFixtures / "plan_p1");
  MemoryEstimate e = estimate_memory(run.spec);
  EXPECT_EQ(e.device_bytes, 143771ull * 1024 * 1024);
  EXPECT_EQ(e.usable_bytes, e.device_bytes - e.cuda_context_bytes);
  EXPECT_TRUE(e.fits);  // it ran on the H200
  run.spec.hardware.mig = "1g.18gb";
  e = estimate_memory(run.spec);
  EXPECT_EQ(e.device_bytes, 143771ull * 1024 * 1024 / 8);
  EXPECT_FALSE(e.fits);
  EXPECT_LT(e.margin_bytes, 0);
}

}  // namespace
}  // namespace fragscope::plan

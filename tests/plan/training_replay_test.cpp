#include "plan/training_replay.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "alloc/alloc_config.h"
#include "plan/training_program.h"
#include "tape_probe.h"

namespace fragscope::plan {
namespace {

using testing::tiny_llama;
constexpr std::uint64_t kDeviceTotal = 1ull << 40;

std::string moment(const ProgramMoment& m) {
  return std::string(program_phase_name(m.phase)) + " " + std::to_string(m.micro_step);
}

void expect_same(const ReplayedRun& passed_over, const ReplayedRun& whole, const std::string& what) {
  EXPECT_EQ(passed_over.peak_allocated_bytes, whole.peak_allocated_bytes) << what;
  EXPECT_EQ(passed_over.peak_reserved_bytes, whole.peak_reserved_bytes) << what;
  EXPECT_EQ(moment(passed_over.peak_allocated_at), moment(whole.peak_allocated_at)) << what;
  EXPECT_EQ(moment(passed_over.peak_reserved_at), moment(whole.peak_reserved_at)) << what;
  EXPECT_EQ(passed_over.unallocated_at_peak_bytes, whole.unallocated_at_peak_bytes) << what;
  EXPECT_EQ(passed_over.breakdown, whole.breakdown) << what;
  EXPECT_EQ(passed_over.num_alloc_retries, whole.num_alloc_retries) << what;
  EXPECT_EQ(passed_over.oom, whole.oom) << what;
  EXPECT_EQ(moment(passed_over.oom_at), moment(whole.oom_at)) << what;
  EXPECT_EQ(passed_over.oom_request_bytes, whole.oom_request_bytes) << what;
  ASSERT_EQ(passed_over.reserved_rises.size(), whole.reserved_rises.size()) << what;
  for (std::size_t i = 0; i < whole.reserved_rises.size(); ++i) {
    EXPECT_EQ(passed_over.reserved_rises[i].micro_step, whole.reserved_rises[i].micro_step) << what;
    EXPECT_EQ(passed_over.reserved_rises[i].bytes, whole.reserved_rises[i].bytes) << what;
  }
}

/// `schedule` replayed both ways; the passing-over replay is returned.
TrainingReplay expect_both_ways_alike(const JobSpec& spec, const TrainingSchedule& schedule,
                                      std::optional<std::uint64_t> capacity, const std::string& what) {
  const TrainingReplay passed_over =
      replay_training(spec, schedule, spec.hardware.alloc_config, capacity, kDeviceTotal);
  const AllocationProgram program = build_training_program(spec, schedule);
  expect_same(passed_over.run, replay_program(program, spec.hardware.alloc_config, capacity, kDeviceTotal), what);
  EXPECT_EQ(passed_over.block_activation_bytes, program.block_activation_bytes) << what;
  return passed_over;
}

/// The job's first planning schedule replayed both ways.
TrainingReplay expect_both_ways_alike(const JobSpec& spec, std::optional<std::uint64_t> capacity,
                                      const std::string& what) {
  return expect_both_ways_alike(spec, planning_schedules(spec).front(), capacity, what);
}

struct Lever {
  const char* name;
  void (*apply)(JobSpec&);
};

const Lever kLevers[] = {
    {"default", [](JobSpec&) {}},
    {"variable lengths",
     [](JobSpec& s) {
       s.training.variable_length = true;
       s.training.min_seq_len = 8;
     }},
    {"expandable segments, variable lengths",
     [](JobSpec& s) {
       s.training.variable_length = true;
       s.hardware.alloc_config = alloc::parse_alloc_conf("expandable_segments:True");
     }},
    {"max_split_size", [](JobSpec& s) { s.hardware.alloc_config = alloc::parse_alloc_conf("max_split_size_mb:20"); }},
    {"eval every 2 steps, at the reserved peak",
     [](JobSpec& s) {
       s.eval = EvalConfig{16, 64, 2};
     }},
    {"full checkpointing, SGD",
     [](JobSpec& s) {
       s.training.checkpointing = Checkpointing::kFull;
       s.training.optimizer = Optimizer::kSgd;
     }},
    {"DDP, Lion",
     [](JobSpec& s) {
       s.parallel = {Strategy::kDdp, 4};
       s.training.optimizer = Optimizer::kLion;
     }},
    {"FSDP, mixed bf16, single-tensor AdamW",
     [](JobSpec& s) {
       s.parallel = {Strategy::kFsdp, 4};
       s.training.precision = Precision::kMixedBf16;
       s.training.optimizer_impl = OptimizerImpl::kSingleTensor;
     }},
    {"ZeRO-2, 8-bit AdamW, chunked loss",
     [](JobSpec& s) {
       s.parallel = {Strategy::kZero2, 4};
       s.training.optimizer = Optimizer::kAdamW8bit;
       s.training.loss = Loss::kChunked;
       s.training.loss_chunk_tokens = 32;
     }},
};

TEST(TrainingReplay, PassingOverMicroStepsGivesWhatReplayingEveryOneGives) {
  // Peaks, their moments and breakdowns, retries and the reserved bytes after every micro-step,
  // whatever the lever and the accumulation (the optimizer and the gradients interact with it).
  for (const Lever& lever : kLevers) {
    for (std::uint64_t ga : {1, 2, 3, 7, 64}) {
      JobSpec s = tiny_llama();
      lever.apply(s);
      s.training.grad_accum = ga;
      const std::string what = std::string(lever.name) + ", grad_accum " + std::to_string(ga);
      const TrainingReplay r = expect_both_ways_alike(s, std::nullopt, what);
      if (ga == 64 && !s.training.variable_length) {
        EXPECT_LT(r.micro_steps_written, 20u) << what;  // of 192
      }
    }
  }
}

TEST(TrainingReplay, WithinACapacityRetriesAndOutOfMemoryComeOutTheSame) {
  // Blocks above max_split_size are never split: 6 MiB above the allocated peak the allocator
  // frees its cache and retries in every micro-step (at new addresses), and each still ends as
  // it began, so the passed-over ones count retries; 1 byte below the peak it runs out.
  for (std::uint64_t ga : {7, 64}) {
    JobSpec s = tiny_llama();
    s.training.micro_batch_size = 16;
    s.training.seq_len = 256;
    s.hardware.alloc_config = alloc::parse_alloc_conf("max_split_size_mb:20");
    s.training.grad_accum = ga;
    const TrainingSchedule schedule = planning_schedules(s).front();
    const std::uint64_t peak =
        replay_training(s, schedule, s.hardware.alloc_config, std::nullopt, kDeviceTotal).run.peak_allocated_bytes;
    const std::string what = "grad_accum " + std::to_string(ga);
    const TrainingReplay squeezed = expect_both_ways_alike(s, peak + (6 << 20), what + ", 6 MiB to spare");
    EXPECT_FALSE(squeezed.run.oom) << what;
    EXPECT_GT(squeezed.run.num_alloc_retries, 3 * ga) << what;
    if (ga == 64) {
      EXPECT_LT(squeezed.micro_steps_written, 40u) << what;  // of 192
    }
    EXPECT_TRUE(expect_both_ways_alike(s, peak - 1, what + ", 1 byte short").run.oom) << what;
  }
}

TEST(TrainingReplay, WholePeriodsOfRepeatedLengthsPassedOverGiveWhatReplayingEveryOneGives) {
  // Lengths drawn `drawn` per optimizer step and taken again after them, as past 16384 at grad_accum
  // 2^20: the periods passed over at once give what the whole program gives, within a capacity
  // (retries in every micro-step) too, and only a few periods per optimizer step are visited.
  for (const std::uint64_t drawn : {1, 3, 5}) {
    for (const std::uint64_t ga : {6, 7, 64}) {
      for (const bool squeezed : {false, true}) {
        JobSpec s = tiny_llama();
        s.training.variable_length = true;
        s.training.min_seq_len = 8;
        s.training.grad_accum = ga;
        if (squeezed) s.hardware.alloc_config = alloc::parse_alloc_conf("max_split_size_mb:20");
        TrainingSchedule schedule = planning_schedules(s).front();
        schedule.lengths = MicroStepLengths::drawn(s, schedule.lengths.count(), kLengthSeed, drawn);
        const std::string what = "drawn " + std::to_string(drawn) + ", grad_accum " + std::to_string(ga) +
                                 (squeezed ? ", 6 MiB to spare" : "");
        std::optional<std::uint64_t> capacity;
        if (squeezed) {
          capacity = replay_training(s, schedule, s.hardware.alloc_config, std::nullopt, kDeviceTotal)
                         .run.peak_allocated_bytes +
                     (6 << 20);
        }
        const TrainingReplay r = expect_both_ways_alike(s, schedule, capacity, what);
        if (ga == 64) {
          EXPECT_LT(r.micro_steps_visited, 8 * (1 + 3 * drawn) + 8) << what;  // of 512
        }
      }
    }
  }
}

TEST(TrainingReplay, AGradAccumOfTwoToTheTwentyReplaysAFewMicroSteps) {
  // 3 × 2^20 micro-steps of one length: the state settles within each optimizer step, and the
  // peaks are those of grad_accum 64 (replayed both ways above), a million micro-steps later.
  JobSpec s = tiny_llama();
  s.training.grad_accum = 64;
  const TrainingReplay small = replay_training(s, planning_schedules(s).front(), {}, std::nullopt, kDeviceTotal);
  s.training.grad_accum = 1u << 20;
  const TrainingReplay large = replay_training(s, planning_schedules(s).front(), {}, std::nullopt, kDeviceTotal);
  EXPECT_LT(large.micro_steps_written, 20u);
  EXPECT_LT(large.micro_steps_visited, 20u);  // the rest of each optimizer step passed over at once
  EXPECT_EQ(large.run.peak_allocated_bytes, small.run.peak_allocated_bytes);
  EXPECT_EQ(large.run.peak_reserved_bytes, small.run.peak_reserved_bytes);
  // the same micro-step of its optimizer step, counted from its start (an optimizer step: its end)
  auto shifted = [](const ProgramMoment& m) {
    const std::uint32_t step = m.micro_step / 64, offset = m.micro_step % 64;
    ProgramMoment at = m;
    at.micro_step = m.phase == ProgramPhase::kOptimizerStep ? (step + 1) * (1u << 20) - 1 : step * (1u << 20) + offset;
    return moment(at);
  };
  EXPECT_EQ(moment(large.run.peak_allocated_at), shifted(small.run.peak_allocated_at));
  EXPECT_EQ(moment(large.run.peak_reserved_at), shifted(small.run.peak_reserved_at));

  // Variable lengths: 8 optimizer steps of 2^20 micro-steps (8 to 64 tokens), 16384 lengths drawn
  // in each; each length is replayed about once per state the optimizer steps leave, and an
  // optimizer step visits its drawn micro-steps and a period or two more.
  s.training.variable_length = true;
  s.training.min_seq_len = 8;
  const TrainingReplay drawn = replay_training(s, planning_schedules(s).front(), {}, std::nullopt, kDeviceTotal);
  EXPECT_LT(drawn.micro_steps_written, 200u);
  EXPECT_LE(drawn.micro_steps_visited, 8 * (3 * kDrawnLengthsPerAccumulation + 1));  // of 8 Mi
  EXPECT_FALSE(drawn.run.oom);
}

}  // namespace
}  // namespace fragscope::plan

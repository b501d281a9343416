#include "plan/canary_plan.h"

#include <algorithm>

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include "plan/assumptions.h"
#include "plan/throughput_model.h"
#include "plan/training_schedule.h"
#include "util/bytes.h"
#include "util/quantiles.h"

namespace fragscope::plan {
namespace {

// Long enough for warm-up, a steady window for the spread criteria and, with variable lengths,
// for the longest sequences to turn up.
constexpr std::uint64_t kMinOptimizerSteps = 10;
constexpr std::uint64_t kMinMicroSteps = 50;
constexpr std::uint64_t kSpreadSeed = 2024;
// Every micro-step of the spread's optimizer steps is drawn: at grad_accum 2^20, 4096 steps
// would be 2^32 draws. Past 2^23 micro-steps (grad_accum above 2048) fewer steps are drawn, at
// least 8: each then sums thousands of lengths, and its spread is a few percent at most.
constexpr std::uint64_t kMaxSpreadMicroSteps = 1ull << 23;
constexpr std::uint64_t kMinSpreadSteps = 8;

}  // namespace

std::pair<double, double> length_spreads(const JobSpec& spec, std::size_t optimizer_steps) {
  if (!spec.training.variable_length) return {0.0, 0.0};
  const std::uint64_t ga = spec.training.grad_accum;
  const std::uint64_t steps =
      std::min<std::uint64_t>(optimizer_steps, std::max(kMinSpreadSteps, kMaxSpreadMicroSteps / ga));
  LengthDraws lengths(length_distribution(spec), kSpreadSeed);
  absl::flat_hash_map<std::uint64_t, double> seconds_of_length;  // one micro-step's: few lengths recur
  auto micro_step_seconds = [&](std::uint64_t seq_len) {
    auto [it, fresh] = seconds_of_length.try_emplace(seq_len, 0.0);
    if (fresh) {
      JobSpec step = spec;
      step.training.seq_len = seq_len;
      step.training.variable_length = false;
      it->second = seconds_per_token(step) * static_cast<double>(spec.training.micro_batch_size * seq_len);
    }
    return it->second;
  };
  std::vector<double> times, rates;
  for (std::uint64_t k = 0; k < steps; ++k) {
    double time = 0;
    for (std::uint64_t m = 0; m < ga; ++m) time += micro_step_seconds(lengths.next());
    times.push_back(time);
    rates.push_back(static_cast<double>(spec.training.micro_batch_size * ga) / time);
  }
  return {relative_spread(times).value_or(0.0), relative_spread(rates).value_or(0.0)};
}

CanaryPlan canary_plan(const JobSpec& spec, const MemoryEstimate& estimate, const std::string& criteria_path,
                       const std::string& change) {
  CanaryPlan plan;
  plan.change = change;
  const TrainingConfig& t = spec.training;
  const std::uint64_t ga = t.grad_accum;
  plan.criteria.device_memory_bytes = estimate.device_bytes;
  plan.criteria.max_hbm_fraction = kMaxHbmFraction;
  const auto [time_spread, rate_spread] = length_spreads(spec);
  plan.predicted_step_time_spread = time_spread;
  plan.predicted_throughput_spread = rate_spread;
  plan.criteria.max_step_time_spread = time_spread + kNoiseSpread;
  plan.criteria.max_throughput_spread = rate_spread + kNoiseSpread;
  plan.predicted_peak_reserved_bytes = estimate.peak_reserved_bytes;
  plan.predicted_hbm_fraction = estimate.hbm_fraction();
  const auto warmup = static_cast<std::uint64_t>(plan.criteria.warmup_steps);
  plan.optimizer_steps = std::max(warmup + kMinOptimizerSteps, (kMinMicroSteps + ga - 1) / ga);
  plan.micro_steps = plan.optimizer_steps * ga;

  if (!change.empty())
    plan.steps.push_back({"Apply the recommended change",
                          fmt::format("{} (the job as specified is not within the limits; this canary validates the "
                                      "changed job).",
                                      change)});
  const std::uint64_t ranks = spec.parallel.world_size;
  const std::string lengths =
      t.variable_length
          ? fmt::format(
                "the production data loader and its length distribution, with one micro-batch forced to the "
                "longest length ({} tokens) in the first optimizer step so the peak is seen early",
                t.seq_len)
          : fmt::format("the production data loader (every micro-batch {} × {} tokens)", t.micro_batch_size,
                        t.seq_len);
  std::string assumed;
  for (const auto& a : assumptions(spec))
    if (a.key == "precision_regime" || a.key == "optimizer_implementation" || a.key == "attention_kernel" ||
        a.key == "loss" || a.key == "allocator")
      assumed += fmt::format("{}{} = {}", assumed.empty() ? "" : "; ", a.key, a.value);
  plan.steps.push_back(
      {"Instrumented short run",
       fmt::format(
           "Run the real job on {} for {} micro-steps ({} optimizer steps of grad_accum {}) with {}, "
           "PYTORCH_CUDA_ALLOC_CONF as planned, and the step hook around the loop "
           "(fragscope.torch.Monitor(\"canary/\") writes canary/rank<R>/steps.jsonl). Sample the GPUs alongside: "
           "nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used,memory.total --format=csv -lms "
           "100 > canary/smi.csv. Predicted peak: {} reserved of {} ({} of HBM); a rank more than {:.0f}% away "
           "from it means the plan's assumptions ({}) do not hold.",
           ranks == 1 ? std::string("its GPU") : fmt::format("all {} ranks", ranks), plan.micro_steps,
           plan.optimizer_steps, ga, lengths, format_bytes(estimate.peak_reserved_bytes),
           format_bytes(estimate.device_bytes), percent_text(plan.predicted_hbm_fraction), kPeakReservedTolerance * 100,
           assumed)});
  const std::string eval =
      spec.eval ? fmt::format("an eval pass of {} × {} tokens (Monitor.phase(\"eval\"), as planned)",
                              spec.eval->micro_batch_size, spec.eval->seq_len)
                : "a full eval pass at the production eval batch and length (Monitor.phase(\"eval\"); the plan has no "
                  "[eval] table, so its memory is not predicted)";
  plan.steps.push_back(
      {"Same run with checkpoint and eval",
       fmt::format(
           "Repeat it with a checkpoint save (Monitor.phase(\"checkpoint\")) and {} inside the run, twice each, "
           "so a train step runs after each: eval's logits and the checkpoint's gathered state are transient "
           "spikes on top of training's reserved memory.",
           eval)});
  plan.steps.push_back(
      {"Check the telemetry",
       fmt::format("fragscope check canary/rank*/steps.jsonl --smi canary/smi.csv --criteria {} (exit 0: commit the "
                   "long run; 1: a criterion failed, see its row).",
                   criteria_path)});
  plan.steps.push_back(
      {"If a criterion fails",
       "An OOM, an allocator retry or a rank above 90% of HBM: take the next proposal within the limit "
       "(fragscope plan --propose ranks them; try one with --set) and run the canary again. A peak far from the "
       "prediction: record a memory snapshot of the canary and compare it with fragscope analyze and fragscope "
       "replay before trusting the plan."});
  return plan;
}

}  // namespace fragscope::plan

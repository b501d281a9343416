#include "plan/canary_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "util/bytes.h"

namespace fragscope::plan {
namespace {

// Long enough for warm-up, a steady window for the spread criteria (≥ 3 steps) and, with
// variable lengths, for the longest sequences to turn up.
constexpr std::uint64_t kMinOptimizerSteps = 10;
constexpr std::uint64_t kMinMicroSteps = 50;

}  // namespace

CanaryPlan canary_plan(const JobSpec& spec, const MemoryEstimate& estimate, const std::string& criteria_path,
                       const std::string& change) {
  CanaryPlan plan;
  if (!change.empty())
    plan.steps.push_back({"Apply the recommended change", fmt::format("{} (the job as specified does not fit).", change)});
  plan.criteria.device_memory_bytes = estimate.device_bytes;
  plan.criteria.max_hbm_fraction = kMaxHbmFraction;
  plan.predicted_hbm_fraction =
      static_cast<double>(estimate.peak_reserved_bytes) / static_cast<double>(estimate.device_bytes);
  const std::uint64_t ga = spec.training.grad_accum;
  plan.micro_steps = std::max(kMinMicroSteps, (static_cast<std::uint64_t>(plan.criteria.warmup_steps) + kMinOptimizerSteps) * ga);
  const std::uint64_t ranks = spec.parallel.world_size;
  const std::string lengths =
      spec.training.variable_length
          ? fmt::format("the production data loader and its length distribution, with one micro-batch forced to the "
                        "longest length ({} tokens) in the first optimizer step so the peak is seen early",
                        spec.training.seq_len)
          : fmt::format("the production data loader (every micro-batch {} × {} tokens)",
                        spec.training.micro_batch_size, spec.training.seq_len);

  plan.steps.push_back(
      {"Instrumented short run",
       fmt::format("Run the real job on all {} rank{} for {} micro-steps ({} optimizer steps of grad_accum {}) with {}, "
                   "the same PYTORCH_CUDA_ALLOC_CONF as production{}, and the step hook around the loop "
                   "(fragscope.torch.Monitor(\"canary/\") writes canary/rank<R>/steps.jsonl). Sample the GPUs "
                   "alongside: nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used,memory.total "
                   "--format=csv -lms 100 > canary/smi.csv. Predicted peak: {} reserved of {} ({:.1f}% of HBM).",
                   ranks, ranks == 1 ? "" : "s", plan.micro_steps, plan.micro_steps / ga, ga, lengths,
                   spec.hardware.expandable_segments ? " (expandable_segments:True)" : "",
                   format_bytes(estimate.peak_reserved_bytes), format_bytes(estimate.device_bytes),
                   plan.predicted_hbm_fraction * 100.0)});
  plan.steps.push_back(
      {"Same run with checkpoint and eval",
       "Repeat it with a checkpoint save (Monitor.phase(\"checkpoint\")) and a full eval pass at the production eval "
       "batch and length (Monitor.phase(\"eval\")) inside the run, twice each, so a train step runs after each: "
       "eval's logits and the checkpoint's gathered state are transient spikes on top of training's reserved memory."});
  plan.steps.push_back(
      {"Check the telemetry",
       fmt::format("fragscope check canary/rank*/steps.jsonl --smi canary/smi.csv --criteria {} (exit 0: commit the "
                   "long run; 1: a criterion failed, see its row).",
                   criteria_path)});
  plan.steps.push_back(
      {"If a rank is above 90% of HBM or any OOM/retry appears",
       "Apply the recommended proposal (fragscope plan --propose), or replay the canary's snapshot with fragscope to "
       "compare allocator settings, and run the canary again."});
  return plan;
}

}  // namespace fragscope::plan

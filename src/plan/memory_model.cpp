#include "plan/memory_model.h"

#include <algorithm>
#include <cmath>
#include <future>

#include <fmt/format.h>

#include "plan/training_replay.h"
#include "util/bytes.h"
#include "util/gpu_catalog.h"

namespace fragscope::plan {
namespace {

// NCCL: NCCL_BUFFSIZE (4 MiB) per channel, peer and protocol; ~0.5 GiB per communicator on
// 8-GPU NVLink nodes. Outside PyTorch's allocator, like the CUDA context. An estimate.
constexpr std::uint64_t kNcclBuffers = 512 * kMiB;

}  // namespace

std::uint64_t MemoryEstimate::item(std::string_view key) const {
  for (const auto& i : breakdown)
    if (i.key == key) return i.bytes;
  return 0;
}

MemoryEstimate estimate_memory(const JobSpec& spec) {
  const std::vector<TrainingSchedule> schedules = planning_schedules(spec);
  std::vector<std::future<MemoryEstimate>> draws;
  for (const auto& s : schedules)
    draws.push_back(std::async(std::launch::async, [&spec, &s] { return estimate_memory(spec, s); }));
  std::vector<MemoryEstimate> estimates;
  for (auto& d : draws) estimates.push_back(d.get());
  auto by_reserved = [](const MemoryEstimate& a, const MemoryEstimate& b) {
    return a.peak_reserved_bytes < b.peak_reserved_bytes;
  };
  MemoryEstimate e = *std::max_element(estimates.begin(), estimates.end(), by_reserved);
  e.draws = estimates.size();
  e.lowest_draw_reserved_bytes = std::min_element(estimates.begin(), estimates.end(), by_reserved)->peak_reserved_bytes;
  return e;
}

MemoryEstimate estimate_memory(const JobSpec& spec, const TrainingSchedule& schedule) {
  MemoryEstimate e;
  e.parameters = spec.model.parameters();
  const GpuSpec& gpu = *find_gpu(spec.hardware.gpu);
  const MigProfile* slice = spec.hardware.mig.empty() ? nullptr : find_mig_profile(gpu, spec.hardware.mig);
  e.device_bytes = slice ? slice->memory_bytes : gpu.total_bytes;
  e.cuda_context_bytes = gpu.context_reserve_bytes;
  e.communication_bytes = spec.parallel.world_size > 1 ? kNcclBuffers : 0;
  const std::uint64_t outside = e.cuda_context_bytes + e.communication_bytes;
  e.usable_bytes = e.device_bytes > outside ? e.device_bytes - outside : 0;
  // cudaMemGetInfo's total sizes the expandable segments' virtual ranges
  const std::uint64_t device_total = e.device_bytes - std::min(e.device_bytes, gpu.context_reserve_bytes);

  const TrainingReplay replayed =
      replay_training(spec, schedule, spec.hardware.alloc_config, std::nullopt, device_total);
  const ReplayedRun& needed = replayed.run;
  e.peak_allocated_bytes = needed.peak_allocated_bytes;
  e.peak_reserved_bytes = needed.peak_reserved_bytes;
  e.peak_allocated_at = needed.peak_allocated_at;
  e.peak_reserved_at = needed.peak_reserved_at;
  e.unallocated_at_peak_bytes = needed.unallocated_at_peak_bytes;
  e.block_activation_bytes = replayed.block_activation_bytes;
  std::uint64_t requested = 0;
  for (int r = 0; r < kMemoryRoles; ++r) {
    if (!needed.breakdown[r]) continue;
    e.breakdown.push_back({role_key(static_cast<MemoryRole>(r)), needed.breakdown[r]});
    requested += needed.breakdown[r];
  }
  std::stable_sort(e.breakdown.begin(), e.breakdown.end(),
                   [](const MemoryItem& a, const MemoryItem& b) { return a.bytes > b.bytes; });
  e.breakdown.push_back({"allocator_rounding", e.peak_allocated_bytes - std::min(requested, e.peak_allocated_bytes)});
  e.micro_steps = schedule.lengths.count();
  e.optimizer_steps = e.micro_steps / spec.training.grad_accum;
  e.eval_passes = schedule.eval_after.size();
  e.longest_seq_len = schedule.lengths.longest();

  e.unconstrained_reserved_bytes = e.peak_reserved_bytes;
  if (e.peak_reserved_bytes <= e.usable_bytes) {
    e.fits = true;  // no cudaMalloc ever fails below the usable memory: nothing to free or retry
  } else {
    const ReplayedRun limited =
        replay_training(spec, schedule, spec.hardware.alloc_config, e.usable_bytes, device_total).run;
    e.fits = !limited.oom;
    e.cache_trimmed = e.fits;
    e.num_alloc_retries = limited.num_alloc_retries;
    e.oom_at = limited.oom_at;
    e.oom_request_bytes = limited.oom_request_bytes;
    if (e.fits) {
      e.peak_reserved_bytes = limited.peak_reserved_bytes;
      e.peak_reserved_at = limited.peak_reserved_at;
      e.unallocated_at_peak_bytes = limited.unallocated_at_peak_bytes;
    }
  }
  e.lowest_draw_reserved_bytes = e.peak_reserved_bytes;
  e.margin_bytes = static_cast<std::int64_t>(e.usable_bytes) - static_cast<std::int64_t>(e.peak_reserved_bytes);
  e.within_hbm_limit = e.fits && e.num_alloc_retries == 0 && e.hbm_fraction() <= kMaxHbmFraction;
  return e;
}

std::string percent_text(double fraction, double limit) {
  for (int decimals = 1; decimals <= 4; ++decimals) {
    const double scale = std::pow(10.0, decimals);
    const double shown = std::round(fraction * 100.0 * scale) / scale / 100.0;
    auto same_side = [&](double edge) {
      return (fraction < edge) == (shown < edge) && (fraction > edge) == (shown > edge);
    };
    if ((same_side(limit) && same_side(1.0)) || decimals == 4)
      return fmt::format("{:.{}f}%", fraction * 100.0, decimals);
  }
  return "";
}

std::string moment_text(const ProgramMoment& moment) {
  switch (moment.phase) {
    case ProgramPhase::kSetup:
      return "model construction";
    case ProgramPhase::kForward:
      return fmt::format("forward of micro-step {}", moment.micro_step + 1);
    case ProgramPhase::kBackward:
      return fmt::format("backward of micro-step {}", moment.micro_step + 1);
    case ProgramPhase::kOptimizerStep:
      return fmt::format("optimizer step after micro-step {}", moment.micro_step + 1);
    case ProgramPhase::kEval:
      return fmt::format("eval pass after micro-step {}", moment.micro_step + 1);
  }
  return "";
}

}  // namespace fragscope::plan

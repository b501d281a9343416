#include "replay/capacity.h"

#include <algorithm>

#include <fmt/format.h>

#include "alloc/size_rules.h"
#include "util/bytes.h"
#include "util/error.h"
#include "util/gpu_catalog.h"

namespace fragscope::replay {
namespace {

// The driver refuses a cudaMalloc with a little more free than it was asked for (what it keeps for itself):
// driver OOMs recorded on the H200 came with up to 3.12 MiB more free than the ask (field clip_lo, cro_lo,
// t5g_lo; held-out B_cap). Only more room than this means a per-process cap refused it.
constexpr std::uint64_t kDriverKeepsBytes = 32ull << 20;

/// The capacity a stretch is replayed at (capacity.h).
std::uint64_t piece_value(const CapacityPiece& piece) {
  if (piece.driver_estimate && *piece.driver_estimate >= piece.lower &&
      (!piece.upper || *piece.driver_estimate < *piece.upper)) {
    return *piece.driver_estimate;
  }
  return piece.upper ? *piece.upper - 1 : piece.lower;
}

/// Capacity over time from the trace's stretches. REQUIRES: more than one.
void infer_over_time(const CapacityEvidence& evidence, Capacity& capacity) {
  const std::vector<CapacityPiece>& pieces = evidence.pieces;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    capacity.steps.push_back({i == 0 ? 0 : pieces[i].first_trace_index, piece_value(pieces[i])});
    if (i == 0) continue;
    const CapacityPiece& before = pieces[i - 1];
    const CapacityPiece& after = pieces[i];
    CapacityChange change;
    change.by_trace_index = after.first_trace_index;
    change.from_bytes = capacity.steps[i - 1].bytes;
    change.to_bytes = capacity.steps[i].bytes;
    // A refusal at or below what was served before: it shrank by more than served - refused;
    // a success at or above what was refused before: it grew by at least success - refused + 1.
    const bool shrank = after.upper && after.upper_trace_index == after.first_trace_index &&
                        *after.upper <= before.lower;
    if (shrank) {
      change.after_trace_index = before.lower_trace_index;
      change.at_least_bytes = before.lower - *after.upper + 1;
    } else {
      change.after_trace_index = before.upper_trace_index;
      change.at_least_bytes = after.lower - *before.upper + 1;
    }
    capacity.changes.push_back(change);
  }
  capacity.bytes = capacity.steps.front().bytes;
  std::uint64_t grew = 0;
  for (const CapacityChange& c : capacity.changes) {
    if (c.non_pytorch_grew()) grew += c.from_bytes - c.to_bytes;
  }
  capacity.source = fmt::format(
      "over time: no one capacity explains the trace's cudaMallocs; {} stretches, memory outside PyTorch's "
      "allocator took {} more by the end than at the start",
      pieces.size(), format_bytes(grew));
}

}  // namespace

Capacity resolve_capacity(const PreparedTrace& trace, const CapacityRequest& request) {
  Capacity capacity;
  std::optional<std::uint64_t> inferred_cap;  // a cap the recorded OOM shows, when nothing names one
  const GpuSpec* gpu = nullptr;
  if (request.gpu) {
    gpu = find_gpu(*request.gpu);
    if (!gpu) {
      throw InputError(fmt::format("--gpu: unknown GPU '{}' (known: {})", *request.gpu,
                                   gpu_names_joined()));
    }
    capacity.device_total = gpu->total_bytes - gpu->context_reserve_bytes;
  }
  if (request.device_memory) capacity.device_total = *request.device_memory;

  if (request.capacity_bytes) {
    capacity.bytes = request.capacity_bytes;
    capacity.source = fmt::format("--capacity {}", format_bytes(*request.capacity_bytes));
  } else if (gpu) {
    capacity.bytes = gpu->usable_bytes();
    capacity.source = fmt::format("{}: {} less {} CUDA context", gpu->name,
                                  format_bytes(gpu->total_bytes),
                                  format_bytes(gpu->context_reserve_bytes));
  } else if (request.unlimited) {
    capacity.source = "unlimited (asked)";
  } else if (trace.capacity.pieces.size() > 1) {
    infer_over_time(trace.capacity, capacity);
  } else if (!trace.ooms.empty()) {
    const RecordedOom& oom = trace.ooms.front();
    capacity.bytes = oom.reserved_at_oom + oom.device_free;
    // A cudaMalloc refused while the driver had room for it: a per-process cap was in force
    // (set_per_process_memory_fraction) that nothing may name. It lies at or above the most
    // the process reserved, and below the smallest reserved + request that failed.
    const std::uint64_t segment =
        alloc::allocation_size(oom.size, trace.recorded_config);  // what cudaMalloc was asked for
    const std::uint64_t failed = trace.capacity.failed_at.value_or(oom.reserved_at_oom + segment);
    const bool driver_had_room = oom.device_free > segment + kDriverKeepsBytes;
    if (driver_had_room && failed > trace.capacity.lower_bound) inferred_cap = failed - 1;
    capacity.source = fmt::format("recorded OOM at event {}{}: {} reserved + {} free on the device",
                                  oom.trace_index, oom.caught ? ", one the run caught" : "",
                                  format_bytes(oom.reserved_at_oom), format_bytes(oom.device_free));
    // A driver OOM: the driver's refusals and successes bound it more tightly than device_free
    // (with room on the device, a cap refused it: below).
    if (!driver_had_room && !trace.capacity.pieces.empty()) {
      const CapacityPiece& piece = trace.capacity.pieces.front();
      if (piece.upper && *capacity.bytes >= *piece.upper) {
        capacity.bytes = *piece.upper - 1;
        capacity.source += fmt::format(", less {}: a cudaMalloc asking for {} in total was refused at event {}",
                                       format_bytes(oom.reserved_at_oom + oom.device_free - *capacity.bytes),
                                       format_bytes(*piece.upper), piece.upper_trace_index);
      } else if (*capacity.bytes < piece.lower) {
        capacity.bytes = piece.lower;
        capacity.source += fmt::format(", raised to the {} the driver served at event {}",
                                       format_bytes(piece.lower), piece.lower_trace_index);
      }
    }
  } else if (trace.capacity.failed_at && *trace.capacity.failed_at > trace.capacity.lower_bound) {
    capacity.bytes = *trace.capacity.failed_at - 1;
    capacity.source = fmt::format(
        "a cudaMalloc failed at event {} asking for {} in total (retried after freeing cache)",
        trace.capacity.failed_at_trace_index, format_bytes(*trace.capacity.failed_at));
  } else {
    capacity.source = "unlimited (the trace records no OOM and no failed cudaMalloc)";
  }

  const std::optional<double> fraction =
      request.memory_fraction ? request.memory_fraction
                              : trace.recorded_config.per_process_memory_fraction;
  if (!fraction && request.allowed_from_message) {
    // The message's figure is rounded: the exact cap lies at or above the most the process
    // reserved, and below the smallest reserved + request that failed.
    std::uint64_t allowed = std::max(*request.allowed_from_message, trace.capacity.lower_bound);
    if (trace.capacity.failed_at && *trace.capacity.failed_at > trace.capacity.lower_bound)
      allowed = std::min(allowed, *trace.capacity.failed_at - 1);
    capacity.allowed_maximum = allowed;
    capacity.source +=
        fmt::format("; the process was capped at {} (set_per_process_memory_fraction, from the OOM message)",
                    format_bytes(allowed));
    return capacity;
  }
  if (!fraction && inferred_cap) {
    capacity.allowed_maximum = inferred_cap;
    capacity.source += fmt::format(
        "; the driver had room, so a per-process cap refused it: at most {} (inferred from the trace's "
        "failed cudaMalloc; set_per_process_memory_fraction?)",
        format_bytes(*inferred_cap));
    return capacity;
  }
  if (fraction) {
    if (!(*fraction > 0.0 && *fraction <= 1.0)) {
      throw InputError(fmt::format("--memory-fraction: {} is not in (0, 1]", *fraction));
    }
    if (capacity.device_total == 0) {
      throw InputError(
          "--memory-fraction needs the device's memory: give --device-memory SIZE or --gpu NAME");
    }
    // As PyTorch: allowed = fraction × totalGlobalMem, only when the fraction is below 1.
    if (*fraction < 1.0) {
      capacity.allowed_maximum =
          static_cast<std::uint64_t>(*fraction * static_cast<double>(capacity.device_total));
    }
  }
  return capacity;
}

}  // namespace fragscope::replay

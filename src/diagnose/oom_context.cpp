#include "diagnose/oom_context.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "diagnose/input_pipeline.h"
#include "snapshot/survived_oom.h"
#include "util/bytes.h"

namespace fragscope::diagnose {
namespace {

/// The last reading of nvidia-smi (for the blind spot): the GPU of the OOM when known.
std::optional<inputs::SmiSample> last_smi_reading(const DoctorInputs& in, std::optional<int> gpu) {
  std::optional<inputs::SmiSample> last;
  for (const SmiInput& smi : in.smi) {
    if (smi.table.samples.size() > 8 * kMinSmiTraceSamples) continue;  // a long trace is not "at the OOM"
    for (const inputs::SmiSample& s : smi.table.samples)
      if (!gpu || s.gpu == *gpu) last = s;
  }
  return last;
}

// Whether `printed` is how PyTorch's OOM message prints `exact` (format_size: two decimals of the
// largest unit that fits, B/KiB/MiB/GiB; "reserved" is the sum of two printed figures).
bool as_pytorch_prints(std::uint64_t exact, std::uint64_t printed) {
  const std::uint64_t error = pytorch_print_error(exact);
  return (exact > printed ? exact - printed : printed - exact) <= error;
}

// The message's figure, unless the trace's exact bytes print as it.
void take_printed(std::optional<std::uint64_t>& exact, const std::optional<std::uint64_t>& printed) {
  if (printed && !(exact && as_pytorch_prints(*exact, *printed))) exact = printed;
}

// The most OOMs a snapshot of `rank` shows the run survived, none fatal (snapshot/survived_oom.h): the counters of
// memory_stats, memory_summary and the telemetry count those too, so up to that many are no failure.
std::int64_t survived_by_rank(const DoctorInputs& in, const std::optional<int>& rank) {
  std::int64_t most = 0;
  for (const SnapshotInput& s : in.snapshots)
    if (!s.oom_index && may_be_same_rank(rank, s.rank))
      most = std::max(most, static_cast<std::int64_t>(s.survived.count));
  return most;
}

}  // namespace

std::uint64_t pytorch_print_error(std::uint64_t printed) {
  const std::uint64_t unit = printed >= (1ull << 30) ? 1ull << 30 : printed >= (1ull << 20) ? 1ull << 20
                             : printed >= 1024        ? 1024
                                                      : 1;
  return unit / 100 + 1;
}

OomSignals gather_oom_signals(const DoctorInputs& in) {
  OomSignals s;
  for (const LogInput& log : in.logs) {
    for (const inputs::OomMessage& m : log.ooms) {
      s.messages.push_back(m);
      if (!s.rank && m.rank) s.rank = m.rank;
    }
    s.sources.push_back(fmt::format("the OOM message in {}", log.path));
  }
  for (const MemoryStatsInput& st : in.stats) {
    if (st.stats.num_ooms > survived_by_rank(in, st.rank)) {
      s.sources.push_back(fmt::format("num_ooms = {} in {}", st.stats.num_ooms, st.path));
      if (!s.rank && st.rank) s.rank = st.rank;
    }
  }
  for (const SummaryInput& su : in.summaries)
    if (su.summary.num_ooms.value_or(0) > survived_by_rank(in, su.rank))
      s.sources.push_back(fmt::format("CUDA OOMs: {} in {}", *su.summary.num_ooms, su.path));
  for (const TelemetryInput& t : in.telemetry)
    for (const inputs::StepRecord& r : t.records)
      if (r.memory_stat("num_ooms").value_or(0) > survived_by_rank(in, t.rank)) {
        s.sources.push_back(fmt::format("num_ooms > 0 at step {} in {}", r.step, t.path));
        if (!s.rank && t.rank) s.rank = t.rank;
        break;
      }
  for (const SnapshotInput& snap : in.snapshots) {
    if (snap.oom_index) {
      const auto& entry = snap.snapshot.trace(snap.device)[*snap.oom_index];
      const std::string_view catcher = snapshot::aten_oom_catcher(snap.snapshot, entry);
      // Caught inside ATen, yet fatal: its rank's log said cuDNN found no plan (snapshot::RunEnd).
      const std::string no_plan =
          catcher.empty() || !snap.cudnn_no_plan
              ? ""
              : fmt::format(", a convolution plan's workspace refused inside at::native::{}: cuDNN then found no plan "
                            "(line {} of {})",
                            catcher, snap.cudnn_no_plan->line, snap.cudnn_no_plan->path);
      s.sources.push_back(
          fmt::format("the `oom` entry at trace event {} of {}{}", *snap.oom_index, snap.path, no_plan));
      if (!s.rank && snap.rank) s.rank = snap.rank;
    }
  }
  return s;
}

OomContext build_oom_context(const DoctorInputs& in, const OomSignals& oom, const SnapshotInput* traced, int device,
                             std::optional<std::size_t> oom_index, const RecordedCurve& curve, const Diagnosis& d) {
  OomContext c;
  c.rank = oom.rank;
  const inputs::OomMessage* message = nullptr;
  for (const auto& m : oom.messages)
    if (!oom.rank || m.rank == oom.rank) {
      message = &m;
      break;
    }
  // A message without a rank prefix (the hook's meta.json, a single-process log) is the rank's own.
  for (const auto& m : oom.messages)
    if (!message && !m.rank) message = &m;
  if (traced && oom_index) {
    const auto& e = traced->snapshot.trace(device)[*oom_index];
    c.trace_index = oom_index;
    c.request_bytes = e.size;
    c.driver_free_bytes = e.addr;
    c.reserved_bytes = curve.reserved[*oom_index];
    c.allocated_bytes = curve.allocated[*oom_index];
  }
  if (message) {
    if (message->tried_to_allocate && c.request_bytes == 0) c.request_bytes = *message->tried_to_allocate;
    if (message->free && !c.driver_free_bytes) c.driver_free_bytes = message->free;
    take_printed(c.allocated_bytes, message->allocated_by_pytorch);
    take_printed(c.reserved_bytes, message->reserved_by_pytorch);
    if (message->total_capacity) c.smi_total_bytes = message->total_capacity;
    c.allowed_bytes = message->allowed;
  }
  if (c.reserved_bytes && c.allocated_bytes && *c.reserved_bytes >= *c.allocated_bytes)
    c.reserved_unallocated = *c.reserved_bytes - *c.allocated_bytes;
  if (message) take_printed(c.reserved_unallocated, message->reserved_unallocated);
  if (!d.segment_map.empty() && d.segment_map_at_oom) {
    std::uint64_t largest = 0;
    for (const auto& row : d.segment_map) largest = std::max(largest, row.largest_free);
    c.largest_free_block = largest;
  }
  if (const auto smi = last_smi_reading(in, message && message->gpu ? message->gpu : std::nullopt)) {
    c.smi_used_bytes = smi->memory_used;
    if (smi->memory_total) c.smi_total_bytes = smi->memory_total;
  }
  return c;
}

std::string blind_spot_line(const OomContext& c) {
  std::string line;
  if (c.smi_used_bytes && c.smi_total_bytes)
    line += fmt::format("nvidia-smi shows {} of {} in use; ", format_bytes(*c.smi_used_bytes),
                        format_bytes(*c.smi_total_bytes));
  if (c.driver_free_bytes) line += fmt::format("the driver reports {} free", format_bytes(*c.driver_free_bytes));
  if (c.allowed_bytes)
    line += fmt::format("{}the process may use only {} (set_per_process_memory_fraction)", line.empty() ? "" : " but ",
                        format_bytes(*c.allowed_bytes));
  if (c.reserved_unallocated)
    line += fmt::format("{}PyTorch holds {} reserved but unallocated", line.empty() ? "" : " and ",
                        format_bytes(*c.reserved_unallocated));
  if (c.largest_free_block) line += fmt::format("; the largest free block is {}", format_bytes(*c.largest_free_block));
  if (c.request_bytes > 0)
    line += fmt::format("{}the request was {}", line.empty() ? "" : "; ", format_bytes(c.request_bytes));
  return line;
}

}  // namespace fragscope::diagnose

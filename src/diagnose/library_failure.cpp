#include "diagnose/library_failure.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "metrics/memory_totals.h"
#include "util/bytes.h"
#include "util/job_phase.h"

namespace fragscope::diagnose {

Verdict judge_library_failure(const DoctorInputs& in, Diagnosis& d) {
  const LibraryFailureInput& log = in.library_failures.back();
  const inputs::LibraryAllocFailure& f = log.failures.back();
  d.library_failure = LibraryFailure{f.library, f.status, f.call, fmt::format("{}:{}", log.path, f.line)};
  const std::string call = f.call.empty() ? std::string() : fmt::format(" in {}", f.call);
  d.phase = std::string(phase_name(JobPhase::kUnknown));
  d.phase_source = "the log names the failing library call, not the phase";
  d.trigger = fmt::format("{} could not allocate device memory{}", f.library, call);
  d.add_evidence("library_alloc_failure",
                 fmt::format("out of memory outside PyTorch's allocator: {} reported {}{} ({})", f.library, f.status,
                             call, d.library_failure->source));
  d.add_evidence("outside_allocator",
                 fmt::format("PyTorch's allocator frees its unused cached blocks and retries before it raises "
                             "OutOfMemoryError; {}'s own allocation does not make it do so, so what PyTorch held "
                             "cached stayed out of its reach, and neither the OOM observer nor an `except "
                             "torch.OutOfMemoryError` handler ran",
                             f.library));
  if (log.failures.size() > 1)
    d.add_evidence("library_alloc_failure",
                   fmt::format("{} such failures in {}; the last is taken", log.failures.size(), log.path));
  const std::string rerun_capped =
      "one rerun with PyTorch's allocator capped a few hundred MiB below the device "
      "(torch.cuda.set_per_process_memory_fraction): if it completes, PyTorch's cache starved the library; if "
      "PyTorch raises its own OOM instead, give that log and snapshot to fragscope doctor";
  if (!in.snapshots.empty()) {
    // A snapshot without an `oom` entry: when dumped where the error was caught, its end is what
    // PyTorch held as the library failed.
    const SnapshotInput& s = in.snapshots.back();
    const int device = snapshot::device_holding_memory(s.snapshot);
    const metrics::MemoryTotals held = metrics::compute_totals(
        s.snapshot, [device](const snapshot::Segment& segment) { return segment.device == device; });
    d.add_evidence("held_at_end",
                   fmt::format("at the end of {} PyTorch held {} reserved: {} allocated to tensors and {} cached and "
                               "unallocated (largest free block {}); dumped where the error was caught, the cache is "
                               "what PyTorch's retry would have released for an allocation of its own, the rest the "
                               "job's tensors",
                               s.path, format_bytes(held.reserved_bytes), format_bytes(held.allocated_bytes),
                               format_bytes(held.reserved_bytes - std::min(held.reserved_bytes, held.allocated_bytes)),
                               format_bytes(held.largest_free_block)));
    d.decide_with = {rerun_capped};
    return Verdict::kUndetermined;
  }
  d.decide_with = {
      fmt::format("what PyTorch held when {} failed: catch RuntimeError as well as torch.OutOfMemoryError around the "
                  "training loop and dump a snapshot there (torch.cuda.memory._dump_snapshot) or memory_stats(): "
                  "reserved far above allocated means PyTorch's cache held the memory the library needed; allocated "
                  "near the device's memory, that the job's tensors did",
                  f.library),
      rerun_capped};
  return Verdict::kUndetermined;
}

}  // namespace fragscope::diagnose

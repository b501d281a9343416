#pragma once
/// @file survived_oom.h
/// @brief Which `oom` trace entries the run went on from, and which one it died of.
///
/// Every OutOfMemoryError the caching allocator raises is an `oom` entry, and the OOM observer fires (and may dump a
/// snapshot) for each, but not every one ends the run. Two kinds are survived:
/// - **Caught by ATen itself.** cuDNN convolutions allocate each candidate plan's workspace inside a try block and
///   move to the next plan on c10::OutOfMemoryError (Conv_v8.cpp: `run_single_conv`, `try_configs` and `try_plans`
///   around `run_conv_plan`, `run_conv_plan_fused`; `generate_and_filter_plans` halves the workspace until it fits;
///   Conv_v7.cpp: `AlgoIterator::try_all`). The run dies there only when every plan fails, and then of a
///   RuntimeError ("... unable to find an engine to execute this computation"), not of this OOM. Known from the
///   entry's C++ frames (`_record_memory_history(stacks="all")`, the default; PyTorch 2.1 and later, which all
///   catch it); a trace with Python frames alone cannot show it.
/// - **Followed by another request.** The run asked for memory again (an `alloc` or `oom` later in the trace):
///   whatever raised the error was caught by the program.
/// The fatal OOM is the trace's last `oom` entry unless it is survived. When the run's log says cuDNN found no plan
/// (inputs/training_log.h), a last entry caught inside ATen with no request after it is the fatal one: every plan's
/// workspace was refused, the last of them here. The replay reads the same rule (replay/prepared_trace.h:
/// `OpKind::kCaughtOom`).
/// Thread-safety: pure functions of an immutable snapshot.

#include <cstddef>
#include <optional>
#include <string_view>

#include "snapshot/snapshot.h"

namespace fragscope::snapshot {

/// @brief The ATen function whose callers catch an OutOfMemoryError raised inside it ("run_conv_plan", ...), when
/// `event`'s stack runs through one; empty otherwise.
std::string_view aten_oom_catcher(const Snapshot& snapshot, const TraceEvent& event);

/// @brief True when `snapshot`'s stacks cannot show a malloc inside one of those functions: they hold no C++
/// frame (`stacks="python"`, or no stacks at all) and convolutions may run (no frame at all, or a frame of
/// torch/nn/modules/conv.py). A cuDNN workspace then looks like any other allocation.
bool hides_aten_catchers(const Snapshot& snapshot);

/// @brief How the run ended, as its log tells (inputs/training_log.h), where it changes which OOM was fatal.
enum class RunEnd {
  kUnknown,
  kCudnnFoundNoPlan,  ///< ATen raised "unable to find an engine": every convolution plan failed
};

/// @brief Index of the `oom` entry the run died of in `device`'s trace: the last one, unless ATen catches it (and
/// `end` is not kCudnnFoundNoPlan) or a request follows it; nullopt when the trace has no such entry.
std::optional<std::size_t> fatal_oom_index(const Snapshot& snapshot, int device, RunEnd end = RunEnd::kUnknown);

/// @brief The `oom` entries of `device`'s trace the run went on from.
struct SurvivedOoms {
  std::size_t count = 0;
  std::size_t caught_by_aten = 0;  ///< of them, those caught inside ATen
  std::string_view last_catcher;   ///< aten_oom_catcher of the last one caught inside ATen
};
SurvivedOoms survived_ooms(const Snapshot& snapshot, int device, RunEnd end = RunEnd::kUnknown);

}  // namespace fragscope::snapshot

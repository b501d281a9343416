#pragma once
/// @file replay_memory.h
/// @brief How many replays of one trace run at once: the threads asked for, but no more than a
/// memory budget holds.
///
/// Why: each replay drives its own allocator model, whose size follows the trace (its live blocks,
/// its segments, the pools it allocates from), not the machine. The densest trace a 0.9 MB file
/// holds makes each replay hold about 50 MB, so 16 threads took 700 MB. What a replay holds is
/// measured (ReplayResult::memory_bytes, an upper bound): the first replay runs alone, and each of
/// the others is taken to hold kUnmeasuredMargin times as much (another config splits and caches
/// differently) unless the caller measured it already. The budget is the larger of
/// kReplayMemoryFloor and kReplayMemoryPerTraceByte times the trace's own size: a small file stays
/// small on any machine (issue 16: under 512 MB for any input under 1 MB), a large trace may use
/// more. A real trace's replay holds a few MB at most, so the threads asked for all run.
/// Thread-safety: run_replays runs the tasks on its own threads; they must be safe to run together.

#include <cstdint>
#include <functional>
#include <vector>

#include "replay/prepared_trace.h"
#include "util/bytes.h"

namespace fragscope::replay {

inline constexpr std::uint64_t kReplayMemoryFloor = 256 * kMiB;
inline constexpr std::uint64_t kReplayMemoryPerTraceByte = 4;
inline constexpr std::uint64_t kUnmeasuredMargin = 2;

/// @brief The bytes `trace` holds: its ops, segment events, address hints and initial state.
std::uint64_t trace_memory_bytes(const PreparedTrace& trace);

/// @brief What the replays of `trace` that run at once may hold together.
std::uint64_t replay_memory_budget(const PreparedTrace& trace);

/// @brief How a set of replays ran.
struct ReplayConcurrency {
  unsigned threads = 1;            ///< the most that ran at once
  unsigned asked = 1;              ///< the threads asked for (0 taken as the cores)
  std::uint64_t replay_bytes = 0;  ///< what each replay was taken to hold
  std::uint64_t budget_bytes = 0;  ///< what they could hold together
  bool memory_limited = false;     ///< the budget, not the threads or the tasks, set `threads`
};

/// @brief Runs every task once, as many at once as `threads` and `budget` allow. A task runs
/// replays one after another and returns the most ReplayResult::memory_bytes they held (0 when
/// it ran none). `replay_bytes`: what each task's replays hold when the caller measured it (the
/// same configs without a memory limit); 0 = measure: tasks run alone until one ran a replay.
/// @throws the first exception a task threw (as run_parallel, util/run_parallel.h).
ReplayConcurrency run_replays(const std::vector<std::function<std::uint64_t()>>& tasks, unsigned threads,
                              std::uint64_t budget, std::uint64_t replay_bytes = 0);

}  // namespace fragscope::replay

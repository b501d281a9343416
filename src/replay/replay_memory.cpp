#include "replay/replay_memory.h"

#include <algorithm>
#include <thread>

#include "util/run_parallel.h"

namespace fragscope::replay {

std::uint64_t trace_memory_bytes(const PreparedTrace& trace) {
  std::uint64_t bytes = trace.ops.capacity() * sizeof(Op) +
                        trace.segment_events.capacity() * sizeof(alloc::SegmentEvent) +
                        trace.address_hints.capacity() * sizeof(alloc::AddressHint) +
                        trace.initial_slots.capacity() * sizeof(std::uint32_t);
  for (const alloc::InitialSegment& s : trace.initial_segments)
    bytes += sizeof(s) + s.live_blocks.capacity() * sizeof(alloc::InitialBlock);
  return bytes;
}

std::uint64_t replay_memory_budget(const PreparedTrace& trace) {
  return std::max(kReplayMemoryFloor, kReplayMemoryPerTraceByte * trace_memory_bytes(trace));
}

ReplayConcurrency run_replays(const std::vector<std::function<std::uint64_t()>>& tasks, unsigned threads,
                              std::uint64_t budget, std::uint64_t replay_bytes) {
  ReplayConcurrency c;
  c.asked = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
  c.budget_bytes = budget;
  std::size_t first = 0;
  std::uint64_t each = replay_bytes;
  if (each == 0) {
    while (first < tasks.size() && each == 0) each = tasks[first++]() * kUnmeasuredMargin;
  }
  c.replay_bytes = each;
  const std::uint64_t fit = each ? std::max<std::uint64_t>(1, budget / each) : c.asked;
  const std::size_t rest = tasks.size() - first;
  c.threads = static_cast<unsigned>(std::max<std::uint64_t>(1, std::min<std::uint64_t>({c.asked, fit, rest})));
  c.memory_limited = fit < c.asked && fit < rest;
  std::vector<std::function<void()>> others;
  for (std::size_t i = first; i < tasks.size(); ++i) others.emplace_back([&, i] { tasks[i](); });
  if (!others.empty()) run_parallel(others, c.threads);
  return c;
}

}  // namespace fragscope::replay

#pragma once
/// @brief Test helper for the LlamaProgram tests: a tiny Llama job, and what an allocation tape
/// says role by role (what is live at its end, what a stretch of it allocated, the most that
/// was live at once in that stretch).

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "plan/allocation_program.h"
#include "plan/job_spec.h"

namespace fragscope::plan::testing {

/// hidden 256, 3 layers, 4 heads over 2 KV heads, MLP 512, vocabulary 1000, on one H200;
/// micro-batch 2 of 64 tokens, amp-bf16, AdamW, SDPA.
inline JobSpec tiny_llama() {
  JobSpec s;
  s.source = "tiny";
  s.model = {"", 256, 3, 4, 2, 512, 1000, false};
  s.training.seq_len = 64;
  s.training.micro_batch_size = 2;
  s.hardware.gpu = "H200";
  return s;
}

struct TapeProbe {
  struct Allocation {
    MemoryRole role;
    alloc::StreamId stream;
    std::uint64_t bytes;
  };
  std::array<std::uint64_t, kMemoryRoles> live_at_end{};  ///< bytes per role
  std::array<std::uint64_t, kMemoryRoles> peak{};         ///< most live at once in the stretch, per role
  std::vector<Allocation> allocated;                      ///< in the stretch, in order

  std::uint64_t live(MemoryRole role) const { return live_at_end[static_cast<int>(role)]; }
  std::uint64_t most(MemoryRole role) const { return peak[static_cast<int>(role)]; }
  /// The sizes allocated in the stretch as `role`, in order.
  std::vector<std::uint64_t> sizes(MemoryRole role) const {
    std::vector<std::uint64_t> out;
    for (const auto& a : allocated)
      if (a.role == role) out.push_back(a.bytes);
    return out;
  }
  std::size_t count(MemoryRole role, std::uint64_t bytes) const {
    return static_cast<std::size_t>(std::count_if(allocated.begin(), allocated.end(),
                                                  [&](const auto& a) { return a.role == role && a.bytes == bytes; }));
  }
};

/// @brief Replays `program`; the stretch is events [from, until).
inline TapeProbe probe(const AllocationProgram& program, std::size_t from = 0,
                       std::size_t until = std::numeric_limits<std::size_t>::max()) {
  TapeProbe out;
  std::vector<MemoryRole> roles(program.tensors, MemoryRole::kTransients);
  std::vector<std::uint64_t> bytes(program.tensors, 0);
  std::array<std::uint64_t, kMemoryRoles> live{};
  for (std::size_t i = 0; i < program.events.size(); ++i) {
    const ProgramEvent& e = program.events[i];
    const bool inside = i >= from && i < until;
    if (e.kind == ProgramEvent::Kind::kAlloc) {
      roles[e.tensor] = e.role;
      bytes[e.tensor] = e.bytes;
      live[static_cast<int>(e.role)] += e.bytes;
      if (inside) out.allocated.push_back({e.role, e.stream, e.bytes});
    } else if (e.kind == ProgramEvent::Kind::kFree) {
      live[static_cast<int>(roles[e.tensor])] -= bytes[e.tensor];
    } else {
      live[static_cast<int>(roles[e.tensor])] -= bytes[e.tensor];
      roles[e.tensor] = e.role;
      live[static_cast<int>(e.role)] += bytes[e.tensor];
    }
    if (inside)
      for (int r = 0; r < kMemoryRoles; ++r) out.peak[r] = std::max(out.peak[r], live[r]);
  }
  out.live_at_end = live;
  return out;
}

/// @brief The events of the `n`-th mark (from 0) up to the next mark: one phase of one step.
inline TapeProbe probe_phase(const AllocationProgram& program, std::size_t n) {
  const std::size_t until = n + 1 < program.marks.size() ? program.marks[n + 1].event : program.events.size();
  return probe(program, program.marks.at(n).event, until);
}

}  // namespace fragscope::plan::testing

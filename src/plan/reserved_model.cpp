#include "plan/reserved_model.h"

#include <algorithm>

#include "alloc/caching_allocator.h"
#include "alloc/device_memory.h"

namespace fragscope::plan {

ReplayedRun replay_program(const AllocationProgram& program, const alloc::AllocConfig& config,
                           std::optional<std::uint64_t> capacity, std::uint64_t device_total_bytes) {
  alloc::DeviceMemory device(capacity);
  alloc::CachingAllocatorOptions options;
  options.config = config;
  options.device_total_memory = device_total_bytes;
  alloc::CachingAllocator model(options, device);

  ReplayedRun run;
  std::vector<alloc::BlockHandle> blocks(program.tensors, alloc::kNoBlock);
  std::vector<MemoryRole> roles(program.tensors, MemoryRole::kTransients);
  std::array<std::uint64_t, kMemoryRoles> live{};
  std::size_t next_mark = 0;
  ProgramMoment now;
  auto step_peaks = [&](std::uint32_t step) {
    if (run.micro_step_peak_allocated.size() <= step) {
      run.micro_step_peak_allocated.resize(step + 1, 0);
      run.micro_step_peak_reserved.resize(step + 1, 0);
    }
  };
  for (std::size_t i = 0; i < program.events.size(); ++i) {
    while (next_mark < program.marks.size() && program.marks[next_mark].event <= i) {
      now = {program.marks[next_mark].phase, program.marks[next_mark].micro_step};
      ++next_mark;
    }
    const ProgramEvent& e = program.events[i];
    switch (e.kind) {
      case ProgramEvent::Kind::kAlloc: {
        const alloc::BlockHandle b = model.malloc(e.bytes, e.stream);
        if (b == alloc::kNoBlock) {
          run.oom = true;
          run.oom_at = now;
          run.oom_request_bytes = e.bytes;
          run.num_alloc_retries = model.stats().num_alloc_retries;
          return run;
        }
        blocks[e.tensor] = b;
        roles[e.tensor] = e.role;
        live[static_cast<std::size_t>(e.role)] += e.bytes;
        break;
      }
      case ProgramEvent::Kind::kFree:
        model.free(blocks[e.tensor]);
        blocks[e.tensor] = alloc::kNoBlock;
        live[static_cast<std::size_t>(roles[e.tensor])] -= e.bytes;
        break;
      case ProgramEvent::Kind::kRetag:
        live[static_cast<std::size_t>(roles[e.tensor])] -= e.bytes;
        roles[e.tensor] = e.role;
        live[static_cast<std::size_t>(e.role)] += e.bytes;
        break;
    }
    const alloc::AllocatorStats& s = model.stats();
    if (s.peak_allocated_bytes > run.peak_allocated_bytes) {
      run.peak_allocated_bytes = s.peak_allocated_bytes;
      run.peak_allocated_at = now;
      run.breakdown = live;
    }
    if (s.peak_reserved_bytes > run.peak_reserved_bytes) {
      run.peak_reserved_bytes = s.peak_reserved_bytes;
      run.peak_reserved_at = now;
      run.unallocated_at_peak_bytes = s.reserved_bytes - s.allocated_bytes;
    }
    if (now.phase != Phase::kSetup) {
      step_peaks(now.micro_step);
      auto& a = run.micro_step_peak_allocated[now.micro_step];
      auto& r = run.micro_step_peak_reserved[now.micro_step];
      a = std::max(a, s.allocated_bytes);
      r = std::max(r, s.reserved_bytes);
    }
  }
  run.num_alloc_retries = model.stats().num_alloc_retries;
  return run;
}

}  // namespace fragscope::plan

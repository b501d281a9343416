#include "plan/reserved_model.h"

#include <algorithm>

#include "alloc/caching_allocator.h"
#include "alloc/device_memory.h"

namespace fragscope::plan {

struct ProgramReplay::Model {
  alloc::DeviceMemory device;
  alloc::CachingAllocator allocator;
  std::vector<alloc::BlockHandle> blocks;  // per tensor
  std::vector<MemoryRole> roles;           // per tensor
  std::array<std::uint64_t, kMemoryRoles> live{};
  std::vector<std::uint32_t> live_tensors;  // in no order; live_slot[t] is t's index
  std::vector<std::uint32_t> live_slot;
  std::uint64_t passed_over_retries = 0;
  ProgramMoment now;
  bool stopped = false;

  Model(const alloc::CachingAllocatorOptions& options, std::optional<std::uint64_t> capacity)
      : device(capacity), allocator(options, device) {}

  void add_live(std::uint32_t tensor, alloc::BlockHandle block, MemoryRole role) {
    if (blocks.size() <= tensor) {
      blocks.resize(tensor + 1, alloc::kNoBlock);
      roles.resize(tensor + 1, MemoryRole::kTransients);
      live_slot.resize(tensor + 1, 0);
    }
    blocks[tensor] = block;
    roles[tensor] = role;
    live_slot[tensor] = static_cast<std::uint32_t>(live_tensors.size());
    live_tensors.push_back(tensor);
  }
  void remove_live(std::uint32_t tensor) {
    blocks[tensor] = alloc::kNoBlock;
    const std::uint32_t last = live_tensors.back();
    live_tensors[live_slot[tensor]] = last;
    live_slot[last] = live_slot[tensor];
    live_tensors.pop_back();
  }
};

ProgramReplay::ProgramReplay(const alloc::AllocConfig& config, std::optional<std::uint64_t> capacity,
                             std::uint64_t device_total_bytes) {
  alloc::CachingAllocatorOptions options;
  options.config = config;
  options.device_total_memory = device_total_bytes;
  model_ = std::make_unique<Model>(options, capacity);
}

ProgramReplay::~ProgramReplay() = default;

bool ProgramReplay::replay(std::span<const ProgramEvent> events, std::span<const ProgramMark> marks) {
  Model& m = *model_;
  if (m.stopped) return false;
  std::size_t next_mark = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    while (next_mark < marks.size() && marks[next_mark].event <= i) {
      m.now = {marks[next_mark].phase, marks[next_mark].micro_step};
      ++next_mark;
    }
    const ProgramEvent& e = events[i];
    switch (e.kind) {
      case ProgramEvent::Kind::kAlloc: {
        const alloc::BlockHandle b = m.allocator.malloc(e.bytes, e.stream);
        if (b == alloc::kNoBlock) {
          m.stopped = true;
          run_.oom = true;
          run_.oom_at = m.now;
          run_.oom_request_bytes = e.bytes;
          run_.num_alloc_retries = m.allocator.stats().num_alloc_retries + m.passed_over_retries;
          return false;
        }
        m.add_live(e.tensor, b, e.role);
        m.live[static_cast<std::size_t>(e.role)] += e.bytes;
        break;
      }
      case ProgramEvent::Kind::kFree:
        m.allocator.free(m.blocks[e.tensor]);
        m.remove_live(e.tensor);
        m.live[static_cast<std::size_t>(m.roles[e.tensor])] -= e.bytes;
        break;
      case ProgramEvent::Kind::kRetag:
        m.live[static_cast<std::size_t>(m.roles[e.tensor])] -= e.bytes;
        m.roles[e.tensor] = e.role;
        m.live[static_cast<std::size_t>(e.role)] += e.bytes;
        break;
    }
    const alloc::AllocatorStats& s = m.allocator.stats();
    if (s.peak_allocated_bytes > run_.peak_allocated_bytes) {
      run_.peak_allocated_bytes = s.peak_allocated_bytes;
      run_.peak_allocated_at = m.now;
      run_.breakdown = m.live;
    }
    if (s.peak_reserved_bytes > run_.peak_reserved_bytes) {
      run_.peak_reserved_bytes = s.peak_reserved_bytes;
      run_.peak_reserved_at = m.now;
      run_.unallocated_at_peak_bytes = s.reserved_bytes - s.allocated_bytes;
    }
    std::vector<ReservedRise>& rises = run_.reserved_rises;
    if (m.now.phase != ProgramPhase::kSetup && (rises.empty() || s.peak_reserved_bytes > rises.back().bytes)) {
      if (rises.empty() || rises.back().micro_step != m.now.micro_step) rises.push_back({m.now.micro_step, 0});
      rises.back().bytes = s.peak_reserved_bytes;
    }
  }
  run_.num_alloc_retries = m.allocator.stats().num_alloc_retries + m.passed_over_retries;
  return true;
}

std::vector<std::uint64_t> ProgramReplay::state() const {
  const Model& m = *model_;
  // A tensor's id enters only as its order among the live ones: a later optimizer step's
  // gradients are new tensors in the old ones' places.
  std::vector<std::uint32_t> live = m.live_tensors;
  std::sort(live.begin(), live.end());
  absl::flat_hash_map<alloc::BlockHandle, std::uint64_t> labels;
  labels.reserve(live.size());
  for (std::uint64_t rank = 0; rank < live.size(); ++rank)
    labels[m.blocks[live[rank]]] = rank << 4 | static_cast<std::uint64_t>(m.roles[live[rank]]);
  return m.allocator.state(labels);
}

void ProgramReplay::add_alloc_retries(std::uint64_t retries) {
  model_->passed_over_retries += retries;
  run_.num_alloc_retries += retries;
}

ReplayedRun replay_program(const AllocationProgram& program, const alloc::AllocConfig& config,
                           std::optional<std::uint64_t> capacity, std::uint64_t device_total_bytes) {
  ProgramReplay replay(config, capacity, device_total_bytes);
  replay.replay(program.events, program.marks);
  return replay.run();
}

}  // namespace fragscope::plan

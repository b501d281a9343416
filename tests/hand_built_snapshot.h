#pragma once
// Test support: small snapshots built by hand, for the cases the recorded fixtures cannot show
// (an empty snapshot, one segment, several devices, unknown trace actions, chosen stacks).

#include <cstdint>
#include <initializer_list>
#include <string>
#include <tuple>
#include <vector>

#include "snapshot/snapshot.h"

namespace fragscope::testing {

struct HandBlock {
  std::uint64_t size = 0;
  std::uint64_t requested = 0;
  snapshot::BlockState state = snapshot::BlockState::kInactive;
  snapshot::StackId stack = 0;
};

inline HandBlock live(std::uint64_t size, std::uint64_t requested, snapshot::StackId stack = 0) {
  return {size, requested, snapshot::BlockState::kActiveAllocated, stack};
}
inline HandBlock pending(std::uint64_t size) { return {size, size, snapshot::BlockState::kActivePendingFree, 0}; }
inline HandBlock hole(std::uint64_t size) { return {size, 0, snapshot::BlockState::kInactive, 0}; }

struct SegmentOptions {
  int device = 0;
  snapshot::PoolKind pool = snapshot::PoolKind::kLarge;
  std::uint64_t stream = 0;
  bool expandable = false;
};

/// A snapshot filled as the reader fills it: segments own contiguous block ranges, block
/// addresses follow the segment's, total_size is the sum of the blocks.
class HandBuiltSnapshot {
 public:
  snapshot::Snapshot snap;

  HandBuiltSnapshot& segment(std::uint64_t address, std::initializer_list<HandBlock> blocks,
                             SegmentOptions options = {}) {
    snapshot::Segment s;
    s.device = options.device;
    s.address = address;
    s.pool = options.pool;
    s.stream = options.stream;
    s.is_expandable = options.expandable;
    s.first_block = static_cast<std::uint32_t>(snap.blocks.size());
    std::uint64_t at = address;
    for (const HandBlock& b : blocks) {
      snap.blocks.push_back({at, b.size, b.requested, b.state, b.stack});
      at += b.size;
      s.total_size += b.size;
    }
    s.block_count = static_cast<std::uint32_t>(blocks.size());
    snap.segments.push_back(s);
    return *this;
  }

  HandBuiltSnapshot& event(int device, snapshot::TraceAction action, std::uint64_t addr, std::uint64_t size,
                           std::int64_t time_us = 0) {
    auto& trace = device_trace(device);
    snapshot::TraceEvent e;
    e.action = action;
    e.addr = addr;
    e.size = size;
    e.time_us = time_us;
    trace.push_back(e);
    return *this;
  }

  /// An action this version does not know, kept under its own spelling.
  HandBuiltSnapshot& unknown_event(int device, const std::string& name, std::int64_t time_us = 0) {
    auto& trace = device_trace(device);
    snapshot::TraceEvent e;
    e.action = snapshot::TraceAction::kOther;
    e.action_name = snap.strings.intern(name);
    e.time_us = time_us;
    trace.push_back(e);
    return *this;
  }

  /// A stack of (file, line, function) frames, innermost first.
  snapshot::StackId stack(std::initializer_list<std::tuple<std::string, int, std::string>> frames) {
    std::vector<snapshot::FrameId> ids;
    for (const auto& [file, line, name] : frames)
      ids.push_back(snap.stacks.intern_frame({snap.strings.intern(file), snap.strings.intern(name), line}));
    return snap.stacks.intern_stack(ids);
  }

 private:
  snapshot::TraceEventList& device_trace(int device) {
    if (snap.device_traces.size() <= static_cast<std::size_t>(device)) snap.device_traces.resize(device + 1);
    return snap.device_traces[static_cast<std::size_t>(device)];
  }
};

}  // namespace fragscope::testing

#include "snapshot/stack_table.h"

#include <algorithm>

namespace fragscope::snapshot {

namespace {

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

}  // namespace

std::size_t StackTable::FrameHash::operator()(const Frame& f) const noexcept {
  return mix(mix(f.filename, f.name), static_cast<std::uint64_t>(f.line));
}

StackTable::StackTable() : stack_offsets_{0, 0} {}  // stack 0: empty

FrameId StackTable::intern_frame(const Frame& frame) {
  auto [it, inserted] = frame_ids_by_value_.try_emplace(frame, static_cast<FrameId>(frames_.size()));
  if (inserted) frames_.push_back(frame);
  return it->second;
}

StackId StackTable::intern_stack(std::span<const FrameId> frames) {
  if (frames.empty()) return 0;
  std::uint64_t hash = frames.size();
  for (FrameId f : frames) hash = mix(hash, f);
  auto same = [&](StackId id) {
    const auto existing = stack(id);
    return std::equal(existing.begin(), existing.end(), frames.begin(), frames.end());
  };
  const auto id = static_cast<StackId>(stack_count());
  const auto [first, inserted] = stack_by_hash_.try_emplace(hash, id);
  if (!inserted) {
    if (same(first->second)) return first->second;
    auto& others = colliding_stacks_[hash];
    for (StackId other : others)
      if (same(other)) return other;
    others.push_back(id);
  }
  frame_ids_.insert(frame_ids_.end(), frames.begin(), frames.end());
  stack_offsets_.push_back(static_cast<std::uint32_t>(frame_ids_.size()));
  return id;
}

}  // namespace fragscope::snapshot

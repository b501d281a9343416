#pragma once
/// @file stack_table.h
/// @brief Interned Python frames and call stacks.
///
/// PyTorch shares identical stacks between blocks and trace entries (one pickled object,
/// referenced by memo); the model keeps them shared: a stack is stored once and named by a
/// StackId. StackId 0 is the empty stack (no frames recorded).
/// Thread-safety: none; build on one thread, then share read-only.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "snapshot/string_table.h"

namespace fragscope::snapshot {

using FrameId = std::uint32_t;
using StackId = std::uint32_t;

/// @brief One Python frame: `{filename, line, name}` in the snapshot.
struct Frame {
  /// `line` when the snapshot gives none that fits a line: PyTorch writes 2^64 − 1 for frames of
  /// torch.compile's C++ (an unsigned -1).
  static constexpr std::int64_t kUnknownLine = -1;
  StringId filename = 0;
  StringId name = 0;
  std::int64_t line = 0;
  /// @brief The line as text: its number, or "?" when unknown.
  std::string line_text() const { return line == kUnknownLine ? "?" : std::to_string(line); }
  friend bool operator==(const Frame&, const Frame&) = default;
};

class StackTable {
 public:
  StackTable();

  /// @brief Returns the id of `frame`, adding it when new.
  FrameId intern_frame(const Frame& frame);
  /// @brief Returns the id of the stack made of `frames` (innermost first), adding it when new.
  StackId intern_stack(std::span<const FrameId> frames);

  const Frame& frame(FrameId id) const { return frames_[id]; }
  /// @brief The frames of stack `id`, innermost first. REQUIRES: id < stack_count().
  std::span<const FrameId> stack(StackId id) const {
    return {frame_ids_.data() + stack_offsets_[id], stack_offsets_[id + 1] - stack_offsets_[id]};
  }
  std::size_t frame_count() const { return frames_.size(); }
  std::size_t stack_count() const { return stack_offsets_.size() - 1; }
  /// @brief About the memory the table holds, for the reader's budget (read_limits.h): each
  /// frame with its index slot, each stack's frame ids, offset and index slot.
  std::uint64_t memory_bytes() const {
    return frames_.size() * (sizeof(Frame) + 32) + frame_ids_.size() * sizeof(FrameId) + stack_offsets_.size() * 32;
  }

 private:
  struct FrameHash {
    std::size_t operator()(const Frame& f) const noexcept;
  };
  std::vector<Frame> frames_;
  absl::flat_hash_map<Frame, FrameId, FrameHash> frame_ids_by_value_;
  std::vector<FrameId> frame_ids_;         // all stacks' frames, back to back
  std::vector<std::uint32_t> stack_offsets_;  // stack i = frame_ids_[offsets[i], offsets[i+1])
  // A stack by the hash of its frames; stacks whose 64-bit hash is taken (practically never)
  // go to colliding_stacks_.
  absl::flat_hash_map<std::uint64_t, StackId> stack_by_hash_;
  absl::flat_hash_map<std::uint64_t, std::vector<StackId>> colliding_stacks_;
};

}  // namespace fragscope::snapshot

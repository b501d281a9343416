#pragma once
/// @file trace_action.h
/// @brief The actions of the allocator's trace ring buffer (`device_traces[d][i]["action"]`).

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace fragscope::snapshot {

enum class TraceAction : std::uint8_t {
  kAlloc,          ///< addr = block, size = requested (unrounded) size
  kFreeRequested,  ///< free() called; size = requested size
  kFreeCompleted,  ///< block back in the pool (at once, or after its stream events)
  kSegmentAlloc,   ///< cudaMalloc; size = segment size
  kSegmentFree,    ///< cudaFree
  kSegmentMap,     ///< expandable segment: pages mapped
  kSegmentUnmap,   ///< expandable segment: pages unmapped
  kSnapshot,       ///< a snapshot was taken; size = active bytes
  kOom,            ///< malloc failed; addr field holds device_free, size = rounded size
  kUserDefined,    ///< older 2.x annotations
  kAnnotate,       ///< 2026 annotations
  kOther,          ///< an action this version does not know (name kept in TraceEvent::action_name)
};

inline constexpr std::size_t kTraceActionCount = 12;

/// @brief What an event of `action` and `size` does to the bytes reserved from the driver:
/// + for a cudaMalloc or mapped pages, − for a cudaFree or unmapped pages, 0 for the rest.
constexpr std::int64_t reserved_bytes_change(TraceAction action, std::uint64_t size) {
  switch (action) {
    case TraceAction::kSegmentAlloc:
    case TraceAction::kSegmentMap: return static_cast<std::int64_t>(size);
    case TraceAction::kSegmentFree:
    case TraceAction::kSegmentUnmap: return -static_cast<std::int64_t>(size);
    default: return 0;
  }
}

/// @brief The snapshot's spelling of `action` ("alloc", "segment_map", ...). kOther → "other".
std::string_view to_string(TraceAction action);
/// @brief Parses the snapshot's spelling; nullopt for unknown actions.
std::optional<TraceAction> parse_trace_action(std::string_view name);

}  // namespace fragscope::snapshot

// Taking over a part of the stream parsed apart by another builder (parallel_reader.h): whether
// it can be taken over exactly, and its strings, frames, stacks and trace events brought in, in
// their order (the machine's side: pickle_part_takeover.cpp).
#include "snapshot/snapshot_builder.h"

#include <algorithm>

#include <absl/container/flat_hash_map.h>

namespace fragscope::snapshot {

using pickle::Machine;
using pickle::TypedRef;

bool SnapshotBuilder::resolve_string(Machine& m, StringId id, const PartMaps* maps, StringId& out) {
  if (id & kPartRef) return m.memo_string(id & ~kPartRef, out);
  out = maps ? maps->strings[id] : id;
  return true;
}

void SnapshotBuilder::end_part() {
  for (auto* refs : {&part_ref_strings_, &part_ref_stacks_}) {
    std::sort(refs->begin(), refs->end());
    refs->erase(std::unique(refs->begin(), refs->end()), refs->end());
  }
}

bool SnapshotBuilder::can_absorb_part(const SnapshotBuilder& part, Machine& m,
                                      std::span<const pickle::PartOp> log) const {
  if (!part.staged_blocks_.empty() || !part.staged_segments_.empty() || !part.out_.blocks.empty() ||
      staged_events_.size() + part.staged_events_.size() > 0xffffffffu)
    return false;
  for (const pickle::PartOp& op : log)
    if (op.kind == pickle::PartOp::kPush && op.type != kEventRef) return false;
  StringId id;
  // What a whole-file parse would have failed on: a frame's names or an action that is not a
  // str, a frames list item that is not a frame.
  for (std::size_t f = 0; f < part.out_.stacks.frame_count(); ++f) {
    const Frame& frame = part.out_.stacks.frame(static_cast<FrameId>(f));
    if (!resolve_string(m, frame.filename, nullptr, id) || !resolve_string(m, frame.name, nullptr, id)) return false;
  }
  for (std::size_t k = 0; k < part.out_.stacks.stack_count(); ++k)
    for (const FrameId f : part.out_.stacks.stack(static_cast<StackId>(k)))
      if ((f & kPartRef) && m.memo_typed(f & ~kPartRef).type != kFrameRef) return false;
  for (const StringId action : part.part_ref_strings_)
    if (!resolve_string(m, action, nullptr, id)) return false;
  for (const StackId stack : part.part_ref_stacks_)
    if (m.memo_typed(stack & ~kPartRef).type != kStackRef) return false;
  return true;
}

void SnapshotBuilder::absorb_part(const SnapshotBuilder& part, Machine& m, PartMaps& maps) {
  const StringTable& strings = part.out_.strings;
  maps.strings.resize(strings.size());
  for (std::size_t i = 0; i < strings.size(); ++i)
    maps.strings[i] = out_.strings.intern(strings.view(static_cast<StringId>(i)));
  const StackTable& stacks = part.out_.stacks;
  maps.frames.resize(stacks.frame_count());
  for (std::size_t i = 0; i < stacks.frame_count(); ++i) {
    Frame frame = stacks.frame(static_cast<FrameId>(i));
    resolve_string(m, frame.filename, &maps, frame.filename);
    resolve_string(m, frame.name, &maps, frame.name);
    maps.frames[i] = out_.stacks.intern_frame(frame);
  }
  maps.stacks.resize(stacks.stack_count());
  std::vector<FrameId>& ids = frame_ids_scratch_;
  for (std::size_t i = 0; i < stacks.stack_count(); ++i) {
    ids.clear();
    for (const FrameId f : stacks.stack(static_cast<StackId>(i)))
      ids.push_back(f & kPartRef ? m.memo_typed(f & ~kPartRef).index : maps.frames[f]);
    maps.stacks[i] = out_.stacks.intern_stack(ids);
  }
  // What the part's events name by reference to earlier parts: a few stacks and actions.
  absl::flat_hash_map<StackId, StackId> part_stacks;
  for (const StackId ref : part.part_ref_stacks_) part_stacks[ref] = m.memo_typed(ref & ~kPartRef).index;
  absl::flat_hash_map<StringId, StringId> part_strings;
  for (const StringId ref : part.part_ref_strings_) resolve_string(m, ref, nullptr, part_strings[ref]);
  maps.first_event = static_cast<std::uint32_t>(staged_events_.size());
  m.reserve_memory(part.staged_events_.size() * sizeof(TraceEvent));
  staged_events_.reserve(staged_events_.size() + part.staged_events_.size());
  for (TraceEvent e : part.staged_events_) {
    e.stack = e.stack & kPartRef ? part_stacks[e.stack] : maps.stacks[e.stack];
    if (e.action == TraceAction::kOther) [[unlikely]] {
      const StringId name = e.action_name & kPartRef ? part_strings[e.action_name] : maps.strings[e.action_name];
      e.action = action_of(name);
      e.action_name = e.action == TraceAction::kOther ? name : 0;
    }
    if (e.user_metadata != 0 && !resolve_string(m, e.user_metadata, &maps, e.user_metadata))
      e.user_metadata = 0;  // not a str: none
    staged_events_.push_back(e);
  }
}

Machine::PartTranslation SnapshotBuilder::part_translation(const PartMaps& maps) {
  Machine::PartTranslation t;
  t.string = [&maps](StringId id) { return maps.strings[id]; };
  t.typed = [&maps](TypedRef ref) -> TypedRef {
    switch (ref.type) {
      case kEventRef: return {kEventRef, maps.first_event + ref.index};
      case kStackRef: return {kStackRef, maps.stacks[ref.index]};
      case kFrameRef: return {kFrameRef, maps.frames[ref.index]};
      default: return ref;  // can_absorb_part admits no other
    }
  };
  return t;
}

}  // namespace fragscope::snapshot

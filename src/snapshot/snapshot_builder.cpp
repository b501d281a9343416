// Recognising the dicts of a snapshot as the pickle machine fills them: trace entries, frames and
// their stacks, blocks, segments (the top level: snapshot_top_level.cpp; parts parsed apart:
// snapshot_part_takeover.cpp).
#include "snapshot/snapshot_builder.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "util/error.h"
#include "util/shown_text.h"

namespace fragscope::snapshot {

using pickle::Kind;
using pickle::Machine;
using pickle::ObjectKind;
using pickle::TypedRef;
using pickle::Value;

namespace {

constexpr const char* kKeyNames[] = {
    "action", "addr", "size", "stream", "time_us", "frames", "device_free", "user_metadata",
    "filename", "line", "name",
    "address", "requested_size", "state", "history", "real_size",
    "device", "total_size", "allocated_size", "active_size", "segment_type", "segment_pool_id",
    "is_expandable", "blocks",
};

}  // namespace

const char* SnapshotBuilder::kind_name(Kind k) {
  switch (k) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "a bool";
    case Kind::kInt:
    case Kind::kWideInt: return "an int";
    case Kind::kUInt64: return "an int of 2^63 or more";
    case Kind::kHugeInt: return "an int wider than 64 bits";
    case Kind::kFloat: return "a float";
    case Kind::kString: return "a str";
    case Kind::kObject: return "a container";
    case Kind::kMark: return "a MARK";
    case Kind::kDeferred:
    case Kind::kForeign: return "a value of another part";
  }
  return "?";
}

SnapshotBuilder::SnapshotBuilder(Snapshot& out, std::uint64_t expected_size) : out_(out) {
  // About 97 bytes of pickle per trace entry; reserved address space costs no memory untouched.
  staged_events_.reserve(std::min<std::uint64_t>(expected_size, std::uint64_t{1} << 36) / 64);
  static_assert(std::size(kKeyNames) == kKeyCount);
  for (int k = 0; k < kKeyCount; ++k) {
    key_ids_[k] = out_.strings.intern(kKeyNames[k]);
    if (key_of_string_.size() <= key_ids_[k]) key_of_string_.resize(key_ids_[k] + 1, -1);
    key_of_string_[key_ids_[k]] = static_cast<std::int8_t>(k);
  }
  state_allocated_ = out_.strings.intern("active_allocated");
  state_pending_ = out_.strings.intern("active_pending_free");
  state_inactive_ = out_.strings.intern("inactive");
  type_small_ = out_.strings.intern("small");
}

std::uint64_t SnapshotBuilder::memory_bytes() const {
  return staged_events_.size() * sizeof(TraceEvent) + staged_blocks_.size() * sizeof(Block) +
         staged_segments_.size() * sizeof(Segment) + out_.blocks.size() * sizeof(Block) +
         out_.segments.size() * sizeof(Segment) + out_.device_traces.size() * sizeof(TraceEventList) +
         copied_events_ * sizeof(TraceEvent) + out_.stacks.memory_bytes() + list_values_.size() * sizeof(Value) +
         stack_by_list_hash_.size() * 32 + key_of_string_.size() + action_of_string_.size() + other_bytes_;
}

bool SnapshotBuilder::gather(std::span<const Value> items, Fields& fields) const {
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    const Value key = items[i];
    if (key.kind() != Kind::kString) return false;
    const auto id = key.payload();
    if (id >= key_of_string_.size() || key_of_string_[id] < 0) continue;
    const int k = key_of_string_[id];
    fields.value[k] = items[i + 1];
    fields.present |= 1u << k;
  }
  return true;
}

// Same result as gather() when the keys are the last trace entry's, position by position
// (a repeated key: the last one wins in both).
bool SnapshotBuilder::gather_like_last_event(std::span<const Value> items, Fields& fields) const {
  const EventKeys& last = last_event_keys_;
  if (last.count == 0 || items.size() != 2 * last.count) return false;
  bool same = true;
  for (std::size_t i = 0; i < last.count; ++i) same &= items[2 * i] == last.keys[i];
  if (!same) return false;
  for (std::size_t i = 0; i < last.count; ++i) fields.value[last.key_at[i]] = items[2 * i + 1];
  fields.present = last.present;
  return true;
}

void SnapshotBuilder::remember_event_keys(std::span<const Value> items, const Fields& fields) {
  EventKeys& last = last_event_keys_;
  last.count = 0;
  if (items.size() / 2 > EventKeys::kMax) return;
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    const auto id = items[i].payload();  // a str: gather() accepted these keys
    last.keys[i / 2] = items[i];
    const int key = id < key_of_string_.size() ? key_of_string_[id] : -1;
    last.key_at[i / 2] = static_cast<std::uint8_t>(key < 0 ? kKeyCount : key);
  }
  last.present = fields.present;
  last.count = items.size() / 2;
}

TypedRef SnapshotBuilder::claim_dict(Machine& m, std::span<const Value> items) {
  Fields f;
  if (gather_like_last_event(items, f)) return make_event(m, f);
  if (!gather(items, f)) return {};
  if (f.has(kAction)) {
    remember_event_keys(items, f);
    return make_event(m, f);
  }
  if (f.has(kFilename) && f.has(kLine) && f.has(kName)) return make_frame(m, f);
  if (f.has(kTotalSize) && f.has(kBlocks)) return make_segment(m, f);
  if (f.has(kSize) && (f.has(kState) || f.has(kHistory))) return make_block(m, f);
  return {};
}

// Field accessors run a few times per trace entry: the checks are inline, the messages cold.
[[noreturn, gnu::cold, gnu::noinline]] void SnapshotBuilder::bad_field(Machine& m, const Fields& f, Key k,
                                                                       const char* what, const char* expected) const {
  if (!f.has(k)) m.fail(fmt::format("{} has no '{}'", what, kKeyNames[k]));
  m.fail(fmt::format("{}: '{}' is {}, expected {}", what, kKeyNames[k], kind_name(f.value[k].kind()), expected));
}

[[noreturn, gnu::cold, gnu::noinline]] void SnapshotBuilder::negative_field(Machine& m, Key k, const char* what,
                                                                            std::int64_t value) const {
  m.fail(fmt::format("{}: '{}' is negative ({})", what, kKeyNames[k], value));
}

inline std::int64_t SnapshotBuilder::int_field(Machine& m, const Fields& f, Key k, const char* what) const {
  if (!f.has(k) || !is_int(f.value[k])) [[unlikely]]  // value[k] is set only when has(k)
    bad_field(m, f, k, what, "an int");
  return m.to_int(f.value[k]);
}

inline std::uint64_t SnapshotBuilder::uint_field(Machine& m, const Fields& f, Key k, const char* what) const {
  if (f.has(k) && f.value[k].kind() == Kind::kUInt64) [[unlikely]]
    return m.to_uint(f.value[k]);
  const std::int64_t n = int_field(m, f, k, what);
  if (n < 0) [[unlikely]]
    negative_field(m, k, what, n);
  return static_cast<std::uint64_t>(n);
}

inline std::uint64_t SnapshotBuilder::bits_field(Machine& m, const Fields& f, Key k, const char* what) const {
  if (!f.has(k) || !is_int64_bits(f.value[k])) [[unlikely]]
    bad_field(m, f, k, what, "an int");
  return m.to_uint(f.value[k]);
}

inline StringId SnapshotBuilder::string_field(Machine& m, const Fields& f, Key k, const char* what) const {
  if (!f.has(k) || f.value[k].kind() != Kind::kString) [[unlikely]]
    bad_field(m, f, k, what, "a str");
  return static_cast<StringId>(f.value[k].payload());
}

StringId SnapshotBuilder::string_or_part_ref(Machine& m, const Fields& f, Key k, const char* what) const {
  if (f.has(k) && f.value[k].kind() == Kind::kForeign) return part_ref(f.value[k]);
  return string_field(m, f, k, what);
}

TraceAction SnapshotBuilder::learn_action(StringId name) {
  if (name >= action_of_string_.size()) action_of_string_.resize(name + 1, 0);
  const auto parsed = parse_trace_action(out_.strings.view(name));
  action_of_string_[name] = static_cast<std::uint8_t>(parsed.value_or(TraceAction::kOther)) + 1;
  return static_cast<TraceAction>(action_of_string_[name] - 1);
}

// Most entries name a frames list that an earlier entry already made a stack, or a fresh empty
// one: those cases inline, the rest (and every error) in stack_of_other().
inline StackId SnapshotBuilder::stack_of(Machine& m, Value frames, const char* what) {
  if (frames.kind() == Kind::kObject) {
    const ObjectKind kind = m.object_kind(frames);
    if (kind == ObjectKind::kTyped && m.typed(frames).type == kStackRef) return m.typed(frames).index;
    if (kind == ObjectKind::kList && m.items(frames).empty()) {
      m.retype(frames, {kStackRef, 0});
      return 0;
    }
  }
  return stack_of_other(m, frames, what);
}

StackId SnapshotBuilder::stack_of_other(Machine& m, Value frames, const char* what) {
  if (frames.kind() == Kind::kNone) return 0;
  if (frames.kind() == Kind::kForeign) {  // in a part: a frames list of an earlier part
    const StackId ref = part_ref(frames);
    if (part_ref_stacks_.empty() || part_ref_stacks_.back() != ref) part_ref_stacks_.push_back(ref);
    return ref;
  }
  if (frames.kind() != Kind::kObject)
    m.fail(fmt::format("{}: 'frames' is {}, expected a list", what, kind_name(frames.kind())));
  if (m.object_kind(frames) == ObjectKind::kTyped) {
    const TypedRef ref = m.typed(frames);
    if (ref.type != kStackRef) m.fail(fmt::format("{}: 'frames' is not a list of frames", what));
    return ref.index;
  }
  if (m.object_kind(frames) == ObjectKind::kDict) m.fail(fmt::format("{}: 'frames' is a dict, expected a list", what));
  const std::span<const Value> items = m.items(frames);
  if (items.empty()) {  // an empty tuple
    m.retype(frames, {kStackRef, 0});
    return 0;
  }
  std::uint64_t hash = items.size();
  for (const Value item : items) {
    hash = (hash ^ item.payload() ^ (static_cast<std::uint64_t>(item.kind()) << 60)) * 0x9e3779b97f4a7c15ull;
  }
  if (const std::optional<StackId> id = cached_stack(hash, items)) {
    m.retype(frames, {kStackRef, *id});
    return *id;
  }
  std::vector<FrameId>& ids = frame_ids_scratch_;
  ids.clear();
  for (const Value item : items) {
    if (item.kind() == Kind::kForeign) {  // in a part: a frame of an earlier part
      ids.push_back(part_ref(item));
      continue;
    }
    if (item.kind() != Kind::kObject || m.object_kind(item) != ObjectKind::kTyped ||
        m.typed(item).type != kFrameRef)
      m.fail(fmt::format("{}: a frame is not a {{filename, line, name}} dict", what));
    ids.push_back(m.typed(item).index);
  }
  const StackId id = out_.stacks.intern_stack(ids);
  cache_stack(hash, items, id);
  m.retype(frames, {kStackRef, id});
  return id;
}

std::optional<StackId> SnapshotBuilder::cached_stack(std::uint64_t hash, std::span<const Value> items) const {
  const auto it = stack_by_list_hash_.find(hash);
  if (it == stack_by_list_hash_.end()) return std::nullopt;
  const ListOfStack& list = it->second;
  const std::span<const Value> values = std::span(list_values_).subspan(list.offset, list.length);
  if (!std::equal(values.begin(), values.end(), items.begin(), items.end())) return std::nullopt;
  return list.stack;
}

void SnapshotBuilder::cache_stack(std::uint64_t hash, std::span<const Value> items, StackId stack) {
  // The first list of a hash stays (a colliding one is interned the slow way each time).
  if (list_values_.size() + items.size() > kMaxListValues || stack_by_list_hash_.contains(hash)) return;
  stack_by_list_hash_.emplace(hash, ListOfStack{stack, static_cast<std::uint32_t>(list_values_.size()),
                                                static_cast<std::uint32_t>(items.size())});
  list_values_.insert(list_values_.end(), items.begin(), items.end());
}

TypedRef SnapshotBuilder::make_frame(Machine& m, const Fields& f) {
  Frame frame;
  frame.filename = string_or_part_ref(m, f, kFilename, "frame");
  frame.name = string_or_part_ref(m, f, kName, "frame");
  // C++ frames of torch.compile carry 2^64 − 1 (an unsigned -1): no line is known.
  const bool unknown = f.has(kLine) && f.value[kLine].kind() == Kind::kUInt64;
  frame.line = unknown ? Frame::kUnknownLine : int_field(m, f, kLine, "frame");
  return {kFrameRef, out_.stacks.intern_frame(frame)};
}

TypedRef SnapshotBuilder::make_event(Machine& m, const Fields& f) {
  constexpr const char* what = "trace entry";
  TraceEvent e;
  if (f.has(kAction) && f.value[kAction].kind() == Kind::kForeign) [[unlikely]] {  // the taker reads it
    e.action_name = part_ref(f.value[kAction]);
    if (part_ref_strings_.empty() || part_ref_strings_.back() != e.action_name)
      part_ref_strings_.push_back(e.action_name);
  } else {
    const StringId name = string_field(m, f, kAction, what);
    e.action = action_of(name);
    if (e.action == TraceAction::kOther) e.action_name = name;
  }
  if (f.has(kAddr)) e.addr = uint_field(m, f, kAddr, what);
  else if (f.has(kDeviceFree)) e.addr = uint_field(m, f, kDeviceFree, what);
  if (f.has(kSize)) e.size = uint_field(m, f, kSize, what);
  if (f.has(kStream)) e.stream = bits_field(m, f, kStream, what);
  if (f.has(kTimeUs)) e.time_us = int_field(m, f, kTimeUs, what);
  if (f.has(kFrames)) e.stack = stack_of(m, f.value[kFrames], what);
  if (f.has(kUserMetadata) && f.value[kUserMetadata].kind() == Kind::kString)
    e.user_metadata = static_cast<StringId>(f.value[kUserMetadata].payload());
  else if (f.has(kUserMetadata) && f.value[kUserMetadata].kind() == Kind::kForeign) [[unlikely]]
    e.user_metadata = part_ref(f.value[kUserMetadata]);
  staged_events_.push_back(e);
  if (staged_events_.size() > 0xffffffffu) m.fail("more than 4 billion trace entries");
  return {kEventRef, static_cast<std::uint32_t>(staged_events_.size() - 1)};
}

TypedRef SnapshotBuilder::make_block(Machine& m, const Fields& f) {
  constexpr const char* what = "block";
  Block b;
  b.size = uint_field(m, f, kSize, what);
  b.address = f.has(kAddress) ? uint_field(m, f, kAddress, what) : kNoAddress;
  if (f.has(kRequestedSize)) b.requested_size = uint_field(m, f, kRequestedSize, what);
  if (f.has(kState)) {
    const StringId state = string_field(m, f, kState, what);
    if (state == state_allocated_) b.state = BlockState::kActiveAllocated;
    else if (state == state_pending_) b.state = BlockState::kActivePendingFree;
    else if (state == state_inactive_) b.state = BlockState::kInactive;
    else m.fail(fmt::format("block: unknown state '{}'", shown_name(out_.strings.view(state))));
  }
  if (f.has(kFrames)) b.stack = stack_of(m, f.value[kFrames], what);
  if (f.has(kHistory) && f.value[kHistory].kind() == Kind::kObject &&
      m.object_kind(f.value[kHistory]) == ObjectKind::kList) {
    // Legacy blocks: the newest history entry holds the live allocation's size and stack.
    const auto history = m.items(f.value[kHistory]);
    if (!history.empty() && history.back().kind() == Kind::kObject &&
        m.object_kind(history.back()) == ObjectKind::kDict) {
      Fields h;
      gather(m.items(history.back()), h);
      if (h.has(kRealSize) && !f.has(kRequestedSize)) b.requested_size = uint_field(m, h, kRealSize, "block history");
      if (h.has(kFrames) && !f.has(kFrames)) b.stack = stack_of(m, h.value[kFrames], "block history");
      if (!f.has(kState)) b.state = BlockState::kActiveAllocated;
    }
  }
  staged_blocks_.push_back(b);
  if (staged_blocks_.size() > 0xffffffffu) m.fail("more than 4 billion blocks");
  return {kBlockRef, static_cast<std::uint32_t>(staged_blocks_.size() - 1)};
}

TypedRef SnapshotBuilder::make_segment(Machine& m, const Fields& f) {
  constexpr const char* what = "segment";
  Segment s;
  s.address = uint_field(m, f, kAddress, what);
  s.total_size = uint_field(m, f, kTotalSize, what);
  if (f.has(kDevice)) {
    const std::int64_t device = int_field(m, f, kDevice, what);  // checked before narrowing to int
    if (device < 0 || device > 4096) m.fail(fmt::format("segment: device {} out of range", device));
    s.device = static_cast<int>(device);
  }
  if (f.has(kStream)) s.stream = bits_field(m, f, kStream, what);
  if (f.has(kSegmentType))
    s.pool = string_field(m, f, kSegmentType, what) == type_small_ ? PoolKind::kSmall : PoolKind::kLarge;
  if (f.has(kIsExpandable))
    s.is_expandable = f.value[kIsExpandable].kind() == Kind::kBool && f.value[kIsExpandable].payload();
  if (f.has(kFrames)) s.stack = stack_of(m, f.value[kFrames], what);
  if (f.has(kSegmentPoolId) && f.value[kSegmentPoolId].kind() == Kind::kObject &&
      m.object_kind(f.value[kSegmentPoolId]) == ObjectKind::kTuple) {
    const auto id = m.items(f.value[kSegmentPoolId]);
    if (id.size() == 2 && is_int(id[0]) && is_int(id[1])) s.pool_id = {m.to_int(id[0]), m.to_int(id[1])};
  }
  const Value blocks = f.value[kBlocks];
  if (blocks.kind() != Kind::kObject || m.object_kind(blocks) != ObjectKind::kList)
    m.fail("segment: 'blocks' is not a list");
  s.first_block = static_cast<std::uint32_t>(out_.blocks.size());
  std::uint64_t offset = 0, allocated = 0, active = 0, requested = 0;
  m.reserve_memory(m.items(blocks).size() * sizeof(Block));  // a blocks list may be named by many segments
  for (const Value item : m.items(blocks)) {
    if (item.kind() != Kind::kObject || m.object_kind(item) != ObjectKind::kTyped || m.typed(item).type != kBlockRef)
      m.fail("segment: an entry of 'blocks' is not a block");
    Block b = staged_blocks_[m.typed(item).index];
    if (b.address == kNoAddress) b.address = s.address + offset;
    offset += b.size;
    if (b.state == BlockState::kActiveAllocated) allocated += b.size;
    if (b.state != BlockState::kInactive) {
      active += b.size;
      requested += b.requested_size;
    }
    out_.blocks.push_back(b);
  }
  s.block_count = static_cast<std::uint32_t>(out_.blocks.size() - s.first_block);
  s.allocated_size = f.has(kAllocatedSize) ? uint_field(m, f, kAllocatedSize, what) : allocated;
  s.active_size = f.has(kActiveSize) ? uint_field(m, f, kActiveSize, what) : active;
  s.requested_size = f.has(kRequestedSize) ? uint_field(m, f, kRequestedSize, what) : requested;
  staged_segments_.push_back(s);
  return {kSegmentRef, static_cast<std::uint32_t>(staged_segments_.size() - 1)};
}

}  // namespace fragscope::snapshot

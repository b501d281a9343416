// SnapshotBuilder::finish: the top-level value (a dict, or a legacy list of segments) read into the
// model: the segments list, the device traces, the allocator settings and the annotations.
#include "snapshot/snapshot_builder.h"

#include <bit>
#include <cstdlib>

#include <fmt/format.h>

namespace fragscope::snapshot {

using pickle::Kind;
using pickle::Machine;
using pickle::ObjectKind;
using pickle::Value;

std::string SnapshotBuilder::text_of(Machine& m, Value v, int depth) const {
  switch (v.kind()) {
    case Kind::kNone: return "None";
    case Kind::kBool: return v.payload() ? "True" : "False";
    case Kind::kInt:
    case Kind::kWideInt: return std::to_string(m.to_int(v));
    case Kind::kUInt64: return std::to_string(m.to_uint(v));
    case Kind::kHugeInt: return "<huge int>";
    case Kind::kFloat: return fmt::format("{}", m.to_float(v));
    case Kind::kString: {  // inside a container, cut: a value's text stays a few KiB
      const std::string_view text = out_.strings.view(static_cast<StringId>(v.payload()));
      return std::string(depth > 0 ? text.substr(0, 4096) : text);
    }
    case Kind::kObject: {
      if (m.object_kind(v) == ObjectKind::kTyped) return "<object>";
      if (depth >= 8) return "...";  // settings are flat; hostile nesting must not recurse deep
      const bool dict = m.object_kind(v) == ObjectKind::kDict;
      std::string s = dict ? "{" : (m.object_kind(v) == ObjectKind::kTuple ? "(" : "[");
      const auto items = m.items(v);
      for (std::size_t i = 0; i < items.size() && s.size() < 4096; ++i) {
        if (i) s += dict && i % 2 ? ": " : ", ";
        s += text_of(m, items[i], depth + 1);
      }
      return s + (dict ? "}" : (m.object_kind(v) == ObjectKind::kTuple ? ")" : "]"));
    }
    case Kind::kMark:
    case Kind::kDeferred:
    case Kind::kForeign: break;
  }
  return "?";
}

void SnapshotBuilder::read_settings(Machine& m, Value settings) {
  if (settings.kind() != Kind::kObject || m.object_kind(settings) != ObjectKind::kDict) return;
  AllocatorSettings& s = out_.allocator_settings;
  s.present = true;
  const auto items = m.items(settings);
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    if (items[i].kind() != Kind::kString) continue;
    const std::string_view key = out_.strings.view(static_cast<StringId>(items[i].payload()));
    const Value v = items[i + 1];
    if (key == "PYTORCH_CUDA_ALLOC_CONF" && v.kind() == Kind::kString) s.alloc_conf = text_of(m, v);
    else if (key == "max_split_size" && is_int(v)) s.max_split_size = m.to_int(v);
    else if (key == "garbage_collection_threshold" && (is_int(v) || v.kind() == Kind::kFloat))
      s.garbage_collection_threshold = m.to_float(v);
    else if (key == "expandable_segments" && v.kind() == Kind::kBool) s.expandable_segments = v.payload();
    else if (key == "release_lock_on_cudamalloc" && v.kind() == Kind::kBool) s.release_lock_on_cudamalloc = v.payload();
    else if (key == "roundup_power2_divisions" && v.kind() == Kind::kObject && m.object_kind(v) == ObjectKind::kDict) {
      const auto div = m.items(v);
      for (std::size_t j = 0; j + 1 < div.size(); j += 2) {
        if (div[j].kind() != Kind::kString || !is_int(div[j + 1])) continue;
        const std::string text(out_.strings.view(static_cast<StringId>(div[j].payload())));
        const unsigned long mib = std::strtoul(text.c_str(), nullptr, 10);
        if (mib == 0 || !std::has_single_bit(mib)) continue;
        const int index = std::countr_zero(mib);
        if (index < 16) s.roundup_power2_divisions[static_cast<std::size_t>(index)] = m.to_int(div[j + 1]);
      }
    } else {
      std::string text = text_of(m, v);
      m.reserve_memory(key.size() + text.size() + 64);  // every key may name the same large value
      other_bytes_ += key.size() + text.size() + 64;
      s.other[std::string(key)] = std::move(text);
    }
  }
}

void SnapshotBuilder::read_annotations(Machine& m, Value list) {
  if (list.kind() != Kind::kObject || m.object_kind(list) != ObjectKind::kList) return;
  for (const Value item : m.items(list)) {
    if (item.kind() != Kind::kObject || m.object_kind(item) != ObjectKind::kDict) continue;
    Annotation a;
    const auto items = m.items(item);
    const std::uint64_t bytes = sizeof(Annotation) + items.size() / 2 * sizeof(a.fields[0]);
    m.reserve_memory(bytes);  // every item may name the same annotation
    other_bytes_ += bytes;
    for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
      if (items[i].kind() != Kind::kString) continue;
      const StringId key = static_cast<StringId>(items[i].payload());
      const Value v = items[i + 1];
      if (key == key_ids_[kDevice] && is_int(v)) {
        const std::int64_t device = m.to_int(v);
        if (device < 0 || device > 4096) m.fail(fmt::format("external annotation: device {} out of range", device));
        a.device = static_cast<int>(device);
      }
      else if (key == key_ids_[kTimeUs] && is_int(v)) a.time_us = m.to_int(v);
      else
        a.fields.emplace_back(
            key, v.kind() == Kind::kString ? static_cast<StringId>(v.payload()) : out_.strings.intern(text_of(m, v)));
    }
    decode_annotation(a, out_.strings);
    out_.annotations.push_back(std::move(a));
  }
}

void SnapshotBuilder::read_segment_list(Machine& m, Value list, const char* what) {
  if (list.kind() != Kind::kObject || m.object_kind(list) != ObjectKind::kList)
    m.fail(fmt::format("not a memory snapshot: '{}' is not a list", what));
  std::size_t i = 0;
  m.reserve_memory(m.items(list).size() * sizeof(Segment));  // every item may name the same segment
  for (const Value item : m.items(list)) {
    if (item.kind() != Kind::kObject || m.object_kind(item) != ObjectKind::kTyped || m.typed(item).type != kSegmentRef)
      m.fail(
          fmt::format("not a memory snapshot: {}[{}] is not a segment (needs address, total_size, blocks)", what, i));
    out_.segments.push_back(staged_segments_[m.typed(item).index]);
    ++i;
  }
}

void SnapshotBuilder::read_traces(Machine& m, Value list) {
  if (list.kind() != Kind::kObject || m.object_kind(list) != ObjectKind::kList)
    m.fail("not a memory snapshot: 'device_traces' is not a list");
  const auto devices = m.items(list);
  m.reserve_memory(devices.size() * sizeof(TraceEventList));
  out_.device_traces.resize(devices.size());
  for (std::size_t d = 0; d < devices.size(); ++d) {
    const Value trace = devices[d];
    if (trace.kind() != Kind::kObject || m.object_kind(trace) != ObjectKind::kList)
      m.fail(fmt::format("not a memory snapshot: device_traces[{}] is not a list", d));
    const auto entries = m.items(trace);
    // Common case: one device whose entries are all staged events in order — move, not copy.
    bool in_order = entries.size() == staged_events_.size();
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const Value e = entries[i];
      if (e.kind() != Kind::kObject || m.object_kind(e) != ObjectKind::kTyped || m.typed(e).type != kEventRef)
        m.fail(fmt::format("not a memory snapshot: device_traces[{}][{}] is not a trace entry (no 'action')", d, i));
      in_order = in_order && m.typed(e).index == i;
    }
    auto& events = out_.device_traces[d];
    events.clear();
    if (in_order) {  // moved in by finish(), when no list reads them any more
      if (move_events_to_ && *move_events_to_ != d && *move_events_to_ < out_.device_traces.size()) {
        m.reserve_memory(staged_events_.size() * sizeof(TraceEvent));
        copied_events_ += staged_events_.size();
        out_.device_traces[*move_events_to_].assign(staged_events_.begin(), staged_events_.end());
      }
      move_events_to_ = d;
      continue;
    }
    if (move_events_to_ == d) move_events_to_.reset();
    // Entries are references: a 3 KB file can name one entry 2^24 times. Each copy is counted.
    m.reserve_memory(entries.size() * sizeof(TraceEvent));
    copied_events_ += entries.size();
    events.reserve(entries.size());
    for (const Value e : entries) events.push_back(staged_events_[m.typed(e).index]);
  }
}

void SnapshotBuilder::finish(Machine& m, Value top) {
  if (top.kind() == Kind::kObject && m.object_kind(top) == ObjectKind::kList) {
    out_.format = SnapshotFormat::kLegacySegmentList;
    read_segment_list(m, top, "segments");
  } else if (top.kind() == Kind::kObject && m.object_kind(top) == ObjectKind::kDict) {
    out_.format = SnapshotFormat::kDict;
    const auto items = m.items(top);
    bool has_segments = false;
    for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
      if (items[i].kind() != Kind::kString) continue;
      const std::string_view key = out_.strings.view(static_cast<StringId>(items[i].payload()));
      if (key == "segments") {
        read_segment_list(m, items[i + 1], "segments");
        has_segments = true;
      } else if (key == "device_traces") {
        read_traces(m, items[i + 1]);
      } else if (key == "allocator_settings") {
        read_settings(m, items[i + 1]);
      } else if (key == "external_annotations") {
        read_annotations(m, items[i + 1]);
      }
    }
    if (!has_segments) m.fail("not a memory snapshot: the top-level dict has no 'segments'");
  } else {
    m.fail(fmt::format("not a memory snapshot: the top-level object is {}", kind_name(top.kind())));
  }
  if (move_events_to_ && *move_events_to_ < out_.device_traces.size())
    out_.device_traces[*move_events_to_] = std::move(staged_events_);
  staged_blocks_ = {};
  staged_segments_ = {};
  staged_events_ = {};
}

}  // namespace fragscope::snapshot

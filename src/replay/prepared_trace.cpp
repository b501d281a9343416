#include "replay/prepared_trace.h"

#include <algorithm>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <fmt/format.h>

#include "alloc/size_rules.h"
#include "replay/initial_state.h"
#include "replay/mem_pools.h"
#include "replay/release_origin.h"
#include "snapshot/survived_oom.h"
#include "util/error.h"

namespace fragscope::replay {
namespace {

using snapshot::TraceAction;

/// The config the trace was recorded under. allocator_settings' structured fields are
/// authoritative (they follow runtime changes); the raw string adds the keys they lack.
alloc::AllocConfig recorded_config(const snapshot::AllocatorSettings& settings) {
  alloc::AllocConfig config;
  try {
    config = alloc::parse_alloc_conf(settings.alloc_conf);
  } catch (const InputError&) {
    // A key this version does not know: keep the defaults for what the fields below miss.
  }
  config.max_split_size = settings.max_split_size < 0
                              ? alloc::kNoSplitLimit
                              : static_cast<std::uint64_t>(settings.max_split_size);
  config.garbage_collection_threshold = settings.garbage_collection_threshold;
  config.expandable_segments = settings.expandable_segments;
  for (std::size_t i = 0; i < alloc::kRoundupIntervals; ++i) {
    config.roundup_power2_divisions[i] =
        static_cast<std::uint32_t>(std::max<std::int64_t>(0, settings.roundup_power2_divisions[i]));
  }
  return config;
}

bool is_segment_event(TraceAction a) {
  return a == TraceAction::kSegmentAlloc || a == TraceAction::kSegmentFree ||
         a == TraceAction::kSegmentMap || a == TraceAction::kSegmentUnmap;
}

alloc::SegmentAction segment_action(TraceAction a) {
  switch (a) {
    case TraceAction::kSegmentAlloc: return alloc::SegmentAction::kAlloc;
    case TraceAction::kSegmentFree: return alloc::SegmentAction::kFree;
    case TraceAction::kSegmentMap: return alloc::SegmentAction::kMap;
    default: return alloc::SegmentAction::kUnmap;
  }
}

/// Builds the op list in one forward pass.
class Compiler {
 public:
  Compiler(PreparedTrace& out, const snapshot::Snapshot& snapshot, int device,
           std::span<const snapshot::TraceEvent> trace, snapshot::RunEnd end)
      : out_(out), snapshot_(snapshot), trace_(trace), fatal_oom_(snapshot::fatal_oom_index(snapshot, device, end)),
        origins_(snapshot), pools_(snapshot, device, trace) {}

  MemPoolMap& pools() { return pools_; }

  void seed_initial_slots() {
    for (const alloc::InitialSegment& segment : out_.initial_segments) {
      for (const alloc::InitialBlock& block : segment.live_blocks) {
        const std::uint32_t slot = take_slot();
        slots_[block.address] = slot;
        out_.initial_slots.push_back(slot);
      }
    }
  }

  void run(std::uint64_t initial_reserved) {
    initial_reserved_ = initial_reserved;
    reserved_ = initial_reserved;
    out_.recorded_peak_reserved = reserved_;
    out_.capacity.pieces.push_back({0, reserved_, 0, std::nullopt, 0, std::nullopt});
    for (std::size_t i = 0; i < trace_.size(); ++i) {
      const snapshot::TraceEvent& e = trace_[i];
      const TraceAction a = e.action;
      const bool grows = a == TraceAction::kSegmentAlloc || a == TraceAction::kSegmentMap;
      const bool shrinks = a == TraceAction::kSegmentFree || a == TraceAction::kSegmentUnmap;
      // A malloc's release is always followed by its cudaMalloc/map or its OOM, never by a block
      // served from the cache: anything else ends the releases seen so far as a cache flush.
      if (in_burst_ && !burst_failed_ && !shrinks && !grows && a != TraceAction::kFreeCompleted &&
          a != TraceAction::kOom) {
        emit_empty_cache();
      }
      switch (a) {
        case TraceAction::kAlloc: on_alloc(e, i); break;
        case TraceAction::kFreeRequested: i = on_free_requested(e, i); break;
        case TraceAction::kFreeCompleted: on_free_completed(e, i); break;
        case TraceAction::kOom: on_oom(e, i); break;
        case TraceAction::kSegmentAlloc:
        case TraceAction::kSegmentMap: on_segment_grow(e); break;
        case TraceAction::kSegmentFree:
        case TraceAction::kSegmentUnmap: on_segment_shrink(e, i); break;
        default: break;  // snapshot markers and annotations do not touch the allocator
      }
    }
    if (in_burst_) emit_empty_cache();
    flush_deferred(static_cast<std::uint32_t>(trace_.size() ? trace_.size() - 1 : 0));
    out_.mem_pools = pools_.pools();
    out_.recorded_final_reserved = reserved_;
    out_.slot_count = static_cast<std::uint32_t>(slot_high_water_);
  }

 private:
  std::uint32_t take_slot() {
    std::uint32_t slot;
    if (!spare_.empty()) {
      slot = spare_.back();
      spare_.pop_back();
    } else {
      slot = next_slot_++;
    }
    slot_high_water_ = std::max<std::size_t>(slot_high_water_, next_slot_);
    return slot;
  }
  void release_slot(std::uint32_t slot) { spare_.push_back(slot); }

  // Whether ATen catches an OOM of this malloc (snapshot/survived_oom.h), once per interned stack.
  bool is_elastic(const snapshot::TraceEvent& e) {
    if (e.stack == 0) return false;
    const auto [it, fresh] = elastic_stacks_.try_emplace(e.stack, false);
    if (fresh) it->second = !snapshot::aten_oom_catcher(snapshot_, e).empty();
    return it->second;
  }

  Op make(OpKind kind, std::uint64_t size, std::uint32_t slot, std::uint64_t stream,
          std::size_t index) {
    Op op;
    op.kind = kind;
    op.size = size;
    op.slot = slot;
    op.stream = stream_id(stream);
    op.trace_index = static_cast<std::uint32_t>(index);
    op.segment_end = static_cast<std::uint32_t>(out_.segment_events.size());
    op.hint_end = static_cast<std::uint32_t>(out_.address_hints.size());
    return op;
  }

 public:
  alloc::StreamId stream_id(std::uint64_t stream) {
    auto [it, inserted] = stream_ids_.try_emplace(stream, 0);
    if (inserted) {
      it->second = static_cast<alloc::StreamId>(out_.streams.size());
      out_.streams.push_back(stream);
    }
    return it->second;
  }

 private:
  void end_group() {
    in_burst_ = false;
    burst_failed_ = false;
    burst_is_flush_ = false;
    burst_origin_known_ = false;
  }

  /// The most the trace's segment events map at once, from the start's reserved bytes: walked once, the first
  /// time a release without a telling stack asks (most traces have none).
  std::uint64_t most_reserved() {
    if (most_reserved_) return *most_reserved_;
    std::uint64_t reserved = initial_reserved_, most = reserved;
    for (const snapshot::TraceEvent& e : trace_) {
      if (e.action == TraceAction::kSegmentAlloc || e.action == TraceAction::kSegmentMap) reserved += e.size;
      if (e.action == TraceAction::kSegmentFree || e.action == TraceAction::kSegmentUnmap)
        reserved -= std::min(reserved, e.size);
      most = std::max(most, reserved);
    }
    most_reserved_ = most;
    return most;
  }

  void on_alloc(const snapshot::TraceEvent& e, std::size_t i) {
    if (auto old = slots_.find(e.addr); old != slots_.end()) {
      // Allocated twice without a free in between: the free fell off a ring-buffer edge.
      ++out_.anomalies;
      out_.ops.push_back(make(OpKind::kFree, 0, old->second, e.stream, i));
      release_slot(old->second);
      slots_.erase(old);
    }
    const std::uint32_t slot = take_slot();
    slots_[e.addr] = slot;
    out_.ops.push_back(make(OpKind::kAlloc, e.size, slot, e.stream, i));
    out_.ops.back().pool = pools_.pool_of_block(e.addr, e.stream);
    out_.ops.back().elastic = is_elastic(e);
    flush_deferred(static_cast<std::uint32_t>(i));
    end_group();
  }

  std::size_t on_free_requested(const snapshot::TraceEvent& e, std::size_t i) {
    auto it = slots_.find(e.addr);
    if (it == slots_.end()) {
      ++out_.anomalies;
      return i;
    }
    const bool completes_now = i + 1 < trace_.size() &&
                               trace_[i + 1].action == TraceAction::kFreeCompleted &&
                               trace_[i + 1].addr == e.addr;
    if (completes_now) {
      out_.ops.push_back(make(OpKind::kFree, 0, it->second, e.stream, i));
      release_slot(it->second);
      slots_.erase(it);
      return i + 1;
    }
    out_.ops.push_back(make(OpKind::kFreeRequested, 0, it->second, e.stream, i));
    return i;
  }

  void on_free_completed(const snapshot::TraceEvent& e, std::size_t i) {
    auto it = slots_.find(e.addr);
    if (it == slots_.end()) {
      ++out_.anomalies;
      return;
    }
    const std::uint32_t slot = it->second;
    slots_.erase(it);
    if (in_burst_) {
      // Completed by release_cached's synchronisation inside a malloc whose cudaMalloc failed:
      // the model synchronises by itself at that point, so this op only runs afterwards.
      deferred_.push_back({slot, e.stream, i});
      return;
    }
    out_.ops.push_back(make(OpKind::kFreeCompleted, 0, slot, e.stream, i));
    release_slot(slot);
  }

  void flush_deferred(std::uint32_t /*index*/) {
    for (const Deferred& d : deferred_) {
      out_.ops.push_back(make(OpKind::kFreeCompleted, 0, d.slot, d.stream, d.index));
      release_slot(d.slot);
    }
    deferred_.clear();
  }

  void on_oom(const snapshot::TraceEvent& e, std::size_t i) {
    if (in_burst_ && burst_is_flush_) emit_empty_cache();
    // Every OOM but the one the run died of was survived (snapshot/survived_oom.h): ATen caught it (cuDNN, for
    // each workspace it tries), or the run asked for memory again after it.
    const bool caught = i != fatal_oom_;
    out_.ops.push_back(make(caught ? OpKind::kCaughtOom : OpKind::kOom, e.size, 0, e.stream, i));
    out_.ops.back().pool = pools_.pool_of_oom(e.stream);
    out_.ooms.push_back({static_cast<std::uint32_t>(i), e.size, e.addr, reserved_, caught});
    ++out_.capacity.release_bursts;
    observe_refused(i, reserved_, reserved_ + device_request(e.size));
    CapacityPiece& piece = out_.capacity.pieces.back();
    if (!piece.driver_estimate) piece.driver_estimate = reserved_ + e.addr;
    flush_deferred(static_cast<std::uint32_t>(i));
    end_group();
  }

  void on_segment_grow(const snapshot::TraceEvent& e) {
    // Releases no stack explains (traces recorded with context="alloc", or cuDNN's flush under Python
    // stacks) were a refused cudaMalloc only if one capacity allows it: one the trace holds more than
    // elsewhere was not refused, so they were a flush.
    if (in_burst_ && !burst_failed_ && !burst_origin_known_ && burst_reserved_ + e.size <= most_reserved())
      burst_is_flush_ = true;
    if (in_burst_ && burst_is_flush_) emit_empty_cache();  // this cudaMalloc belongs to the next malloc
    if (in_burst_ && !burst_failed_) {
      // The first cudaMalloc/map after a release burst is the one that failed before it.
      burst_failed_ = true;
      ++out_.capacity.release_bursts;
      const std::uint64_t failed = burst_reserved_ + e.size;
      if (!out_.capacity.failed_at || failed < *out_.capacity.failed_at) {
        out_.capacity.failed_at = failed;
        out_.capacity.failed_at_trace_index = static_cast<std::uint32_t>(&e - trace_.data());
      }
      observe_refused(static_cast<std::size_t>(&e - trace_.data()), burst_reserved_, failed);
    }
    pools_.on_segment_event(static_cast<std::size_t>(&e - trace_.data()));
    reserved_ += e.size;
    out_.recorded_peak_reserved = std::max(out_.recorded_peak_reserved, reserved_);
    out_.capacity.lower_bound = std::max(out_.capacity.lower_bound, reserved_);
    observe_served(static_cast<std::size_t>(&e - trace_.data()), reserved_);
    out_.segment_events.push_back({segment_action(e.action), e.addr, e.size});
    out_.address_hints.push_back({e.addr, e.size});
  }

  void on_segment_shrink(const snapshot::TraceEvent& e, std::size_t i) {
    const ReleaseOrigin origin = origins_.classify(e.stack);
    const bool flush = origin == ReleaseOrigin::kFlush;
    // A flush right before a malloc's own release (or the reverse) is a group of its own.
    if (in_burst_ && origin != ReleaseOrigin::kUnknown && flush != burst_is_flush_) emit_empty_cache();
    if (!in_burst_) {
      in_burst_ = true;
      burst_is_flush_ = flush;
      burst_first_ = static_cast<std::uint32_t>(i);
      burst_reserved_ = reserved_;
    }
    if (origin != ReleaseOrigin::kUnknown) burst_origin_known_ = true;
    pools_.on_segment_event(i);
    reserved_ -= std::min(reserved_, e.size);
    out_.segment_events.push_back({segment_action(e.action), e.addr, e.size});
  }

  /// Bytes the driver was asked for by a malloc of `rounded` bytes that found nothing cached: a
  /// new segment, or under expandable segments at most its pages (never less than was asked).
  std::uint64_t device_request(std::uint64_t rounded) const {
    const alloc::AllocConfig& config = out_.recorded_config;
    if (!config.expandable_segments) return alloc::allocation_size(rounded, config);
    const std::uint64_t page = alloc::pool_of(rounded) == alloc::PoolKind::kSmall ? alloc::kSmallBuffer
                                                                                   : config.large_segment_size;
    return (rounded + page - 1) / page * page;
  }

  // Capacity stretches (CapacityPiece): grown greedily, each as long as one capacity explains it.
  void observe_served(std::size_t i, std::uint64_t held) {
    CapacityPiece& piece = out_.capacity.pieces.back();
    const auto index = static_cast<std::uint32_t>(i);
    if (piece.upper && held >= *piece.upper) {
      out_.capacity.pieces.push_back({index, held, index, std::nullopt, 0, std::nullopt});
    } else if (held > piece.lower) {
      piece.lower = held;
      piece.lower_trace_index = index;
    }
  }
  void observe_refused(std::size_t i, std::uint64_t held, std::uint64_t refused) {
    CapacityPiece& piece = out_.capacity.pieces.back();
    const auto index = static_cast<std::uint32_t>(i);
    if (refused <= piece.lower) {
      out_.capacity.pieces.push_back({index, held, index, refused, index, std::nullopt});
      return;
    }
    if (held > piece.lower) {
      piece.lower = held;
      piece.lower_trace_index = index;
    }
    if (!piece.upper || refused < *piece.upper) {
      piece.upper = refused;
      piece.upper_trace_index = index;
    }
  }

  /// The releases since burst_first_ were an emptyCache() call.
  void emit_empty_cache() {
    out_.ops.push_back(make(OpKind::kEmptyCache, 0, 0, 0, burst_first_));
    ++out_.flushes;
    flush_deferred(burst_first_);
    end_group();
  }
  struct Deferred {
    std::uint32_t slot;
    std::uint64_t stream;
    std::size_t index;
  };

  PreparedTrace& out_;
  const snapshot::Snapshot& snapshot_;
  std::span<const snapshot::TraceEvent> trace_;
  absl::flat_hash_map<snapshot::StackId, bool> elastic_stacks_;
  std::optional<std::size_t> fatal_oom_;  // the `oom` entry the run died of (snapshot/survived_oom.h)
  absl::flat_hash_map<std::uint64_t, std::uint32_t> slots_;  // live address → slot
  absl::flat_hash_map<std::uint64_t, alloc::StreamId> stream_ids_;
  std::vector<std::uint32_t> spare_;
  std::uint32_t next_slot_ = 0;
  std::size_t slot_high_water_ = 0;
  std::vector<Deferred> deferred_;
  std::uint64_t reserved_ = 0;
  std::uint64_t burst_reserved_ = 0;
  std::uint32_t burst_first_ = 0;   // trace index of the group's first release
  bool in_burst_ = false;
  bool burst_failed_ = false;
  bool burst_is_flush_ = false;     // the stacks say emptyCache()
  bool burst_origin_known_ = false;  // some release of the group has a stack that tells why
  std::uint64_t initial_reserved_ = 0;
  std::optional<std::uint64_t> most_reserved_;  // the most the trace maps at once (most_reserved)
  ReleaseOriginClassifier origins_;
  MemPoolMap pools_;
};

}  // namespace

bool has_elastic_allocs(const PreparedTrace& trace) {
  return std::any_of(trace.ops.begin(), trace.ops.end(), [](const Op& op) { return op.elastic; });
}

std::vector<std::uint32_t> malloc_op_of_event(const PreparedTrace& trace) {
  std::vector<std::uint32_t> op_of_event(trace.trace_events, kNoOp);
  for (std::size_t k = 0; k < trace.ops.size(); ++k) {
    const Op& op = trace.ops[k];
    if (op.kind == OpKind::kAlloc || op.kind == OpKind::kOom)
      op_of_event[op.trace_index] = static_cast<std::uint32_t>(k);
  }
  return op_of_event;
}

const RecordedOom* fatal_oom(const PreparedTrace& trace) {
  return trace.ooms.empty() || trace.ooms.back().caught ? nullptr : &trace.ooms.back();
}

namespace {

/// Refuses addresses and sizes no CUDA allocator produces (the models rely on both: addresses
/// below 2^48 and 512-aligned, sizes below 2^48).
void check_plausible(const snapshot::Snapshot& snapshot, int device,
                     std::span<const snapshot::TraceEvent> trace, const std::string& source) {
  constexpr std::uint64_t kLimit = 1ull << 48;
  auto bad = [](std::uint64_t address, std::uint64_t size) {
    return address >= kLimit || address % alloc::kMinBlockSize != 0 || size >= kLimit;
  };
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const snapshot::TraceEvent& e = trace[i];
    const bool checked = e.action == TraceAction::kAlloc || is_segment_event(e.action);
    if (checked && bad(e.addr, e.size)) {
      throw InputError(fmt::format("{}: trace event {} ({}) has address {:#x} and size {}, which "
                                   "no CUDA caching allocator produces",
                                   source, i, snapshot.action_name(e), e.addr, e.size));
    }
    if (e.action == TraceAction::kOom && e.size >= kLimit) {
      throw InputError(fmt::format("{}: trace event {} (oom) asks for {} bytes", source, i, e.size));
    }
  }
  for (const snapshot::Segment& s : snapshot.segments) {
    if (s.device == device && bad(s.address, s.total_size)) {
      throw InputError(fmt::format("{}: segment at {:#x} of {} bytes is not a CUDA segment", source,
                                   s.address, s.total_size));
    }
  }
  absl::flat_hash_set<std::uint64_t> streams;
  absl::flat_hash_set<std::pair<std::int64_t, std::int64_t>> pools;
  for (const snapshot::TraceEvent& e : trace) streams.insert(e.stream);
  for (const snapshot::Segment& s : snapshot.segments) {
    if (s.device != device) continue;
    streams.insert(s.stream);
    pools.insert(s.pool_id);
  }
  const auto too_many = [&](std::size_t count, std::size_t limit, std::string_view what) {
    if (count > limit) {
      throw InputError(fmt::format("{}: the trace of device {} names {} {} (at most {}); no recording of a training "
                                   "process names that many",
                                   source, device, count, what, limit));
    }
  };
  too_many(streams.size(), kMaxTraceStreams, "CUDA streams");
  too_many(pools.size(), kMaxTraceMemPools, "memory pools");
}

/// Refuses a trace that allocates from more pools than a replay should hold (kMaxAllocatingPools).
void check_allocating_pools(const PreparedTrace& out) {
  absl::flat_hash_set<std::uint32_t> pairs;
  for (const Op& op : out.ops) {
    if (op.kind == OpKind::kAlloc) pairs.insert(std::uint32_t{op.pool} << 16 | op.stream);
  }
  if (pairs.size() > kMaxAllocatingPools) {
    throw InputError(fmt::format("{}: the trace allocates from {} (memory pool, stream) pairs; more than {} is no "
                                 "recording of a training process",
                                 out.source, pairs.size(), kMaxAllocatingPools));
  }
}

}  // namespace

PreparedTrace prepare_trace(const snapshot::Snapshot& snapshot, int device, const std::string& source,
                            snapshot::RunEnd end) {
  const std::span<const snapshot::TraceEvent> trace = snapshot.trace(device);
  if (trace.empty()) {
    throw InputError(fmt::format(
        "{}: no allocator trace for device {} (record with "
        "torch.cuda.memory._record_memory_history() before the run)",
        source, device));
  }
  if (trace.size() > 0xffffffffu) {
    throw InputError(fmt::format("{}: trace of {} events is too long", source, trace.size()));
  }
  check_plausible(snapshot, device, trace, source);
  PreparedTrace out;
  out.source = source;
  out.device = device;
  out.trace_events = trace.size();
  out.recorded_config_known = snapshot.allocator_settings.present;
  out.recorded_config = recorded_config(snapshot.allocator_settings);
  out.ops.reserve(trace.size() * 3 / 5 + 16);

  Compiler compiler(out, snapshot, device, trace, end);
  compiler.stream_id(0);  // the legacy default stream is always id 0
  InitialState initial = reconstruct_initial_state(
      snapshot, device, trace, out.recorded_config,
      [&](std::uint64_t stream) { return compiler.stream_id(stream); },
      [&](std::pair<std::int64_t, std::int64_t> pool) { return compiler.pools().dense(pool); });
  out.initial_segments = std::move(initial.segments);
  out.recorded_initial_reserved = initial.reserved;
  out.anomalies += initial.anomalies;
  for (const alloc::InitialSegment& s : out.initial_segments) {
    if (!s.live_blocks.empty()) out.starts_mid_run = true;
  }
  // A small segment with nothing live may predate recording; a large one means mid-run.
  if (out.recorded_initial_reserved > alloc::kSmallBuffer) out.starts_mid_run = true;

  out.elastic_hidden = snapshot::hides_aten_catchers(snapshot);

  compiler.seed_initial_slots();
  compiler.run(initial.reserved);
  check_allocating_pools(out);
  return out;
}

}  // namespace fragscope::replay

#include "replay/replay_engine.h"

#include <algorithm>
#include <memory>
#include <type_traits>

#include <fmt/format.h>

#include "alloc/caching_allocator.h"
#include "alloc/device_memory.h"
#include "alloc/ideal_packer.h"
#include "util/error.h"

namespace fragscope::replay {
namespace {

using alloc::BlockHandle;
using alloc::kNoBlock;

/// Maxima of reserved/allocated over equal stretches of the op list.
class TimelineBuilder {
 public:
  TimelineBuilder(std::size_t ops, std::size_t points) : ops_(ops), points_(points) {
    if (points_ > ops_) points_ = ops_;
    advance_boundary();
  }
  void observe(std::size_t op_index, std::uint32_t trace_index, std::uint64_t reserved,
               std::uint64_t allocated) {
    if (points_ == 0) return;
    if (!open_) {
      current_ = {trace_index, trace_index, reserved, allocated};
      open_ = true;
    }
    current_.last_trace_index = trace_index;
    current_.reserved = std::max(current_.reserved, reserved);
    current_.allocated = std::max(current_.allocated, allocated);
    if (op_index + 1 >= boundary_) {
      points.push_back(current_);
      open_ = false;
      advance_boundary();
    }
  }
  void finish() {
    if (open_) points.push_back(current_);
    open_ = false;
  }
  std::vector<TimelinePoint> points;

 private:
  void advance_boundary() {
    if (points_ == 0) return;
    boundary_ = (points.size() + 1) * ops_ / points_;
  }
  std::size_t ops_;
  std::size_t points_;
  std::size_t boundary_ = 0;
  bool open_ = false;
  TimelinePoint current_;
};

bool by_action_and_size(const alloc::SegmentEvent& a, const alloc::SegmentEvent& b) {
  if (a.action != b.action) return a.action < b.action;
  return a.size < b.size;
}

/// Do the model's segment events for one malloc match the recorded ones (as multisets)?
bool same_segment_events(std::vector<alloc::SegmentEvent>& simulated,
                         std::vector<alloc::SegmentEvent>& recorded) {
  if (simulated.size() != recorded.size()) return false;
  std::sort(simulated.begin(), simulated.end(), by_action_and_size);
  std::sort(recorded.begin(), recorded.end(), by_action_and_size);
  for (std::size_t i = 0; i < simulated.size(); ++i) {
    if (simulated[i].action != recorded[i].action || simulated[i].size != recorded[i].size) {
      return false;
    }
  }
  return true;
}

/// The replay loop, compiled per model type so that its calls are direct (the models are
/// final), and per kRecords: whether this replay records more than its result (the self-check,
/// the timeline). Most replays (whatif's sweeps, the capacity bisection, the benchmarks) record
/// neither, and their loop carries no test for them: this loop runs tens of millions of times
/// per second.
template <typename Model, bool kRecords>
ReplayResult replay_through(Model& model, alloc::DeviceMemory& device, const PreparedTrace& trace,
                            const ReplayOptions& options) {
  const bool self_check =
      kRecords && options.self_check && std::is_same_v<Model, alloc::CachingAllocator>;
  const bool timeline_on = kRecords && options.timeline_points > 0;
  std::vector<alloc::SegmentEvent> simulated;
  std::vector<alloc::SegmentEvent> recorded;
  if (self_check) model.set_segment_log(&simulated);

  std::vector<BlockHandle> handles(trace.slot_count, kNoBlock);
  ReplayResult result;
  const alloc::AllocatorStats& stats = model.stats();
  if (!trace.initial_segments.empty()) {
    const std::vector<BlockHandle> live = model.restore(trace.initial_segments);
    for (std::size_t i = 0; i < live.size(); ++i) handles[trace.initial_slots[i]] = live[i];
    // A device smaller than the state the trace starts in: its allocator would have given its
    // cache back on the way there (what a failed cudaMalloc does); what is live must still fit.
    if (const auto capacity = device.capacity(); capacity && stats.reserved_bytes > *capacity) {
      model.empty_cache();
      simulated.clear();  // not a malloc's events
      if (stats.reserved_bytes > *capacity && !trace.ops.empty()) {
        result.oom = true;
        result.oom_trace_index = trace.ops.front().trace_index;
        result.stats = stats;
        if (options.progress != nullptr) options.progress->add(trace.ops.size());
        return result;
      }
    }
  }

  TimelineBuilder timeline(trace.ops.size(), kRecords ? options.timeline_points : 0);
  const std::vector<Op>& ops = trace.ops;
  std::uint32_t hints_begin = 0;
  std::uint32_t segments_begin = 0;
  bool stop = false;
  bool hints_offered = false;
  const std::vector<CapacityStep>& steps = options.capacity_steps;
  std::size_t next_step = 0;
  ProgressCounter* const progress = options.progress;
  constexpr std::size_t kProgressBatch = std::size_t{1} << 16;  // a few milliseconds of replay

  // Replays `op`; false when the replay stops after it.
  auto replay_op = [&](const Op& op) {
    switch (op.kind) {
      case OpKind::kAlloc:
      case OpKind::kOom:
      case OpKind::kCaughtOom: {
        // Offer the real driver's addresses of this malloc (most mallocs have none).
        if (options.use_recorded_addresses && (op.hint_end != hints_begin || hints_offered)) {
          device.offer_hints({trace.address_hints.data() + hints_begin,
                              op.hint_end - hints_begin});
          hints_offered = op.hint_end != hints_begin;
        }
        if constexpr (!std::is_same_v<Model, alloc::CachingAllocator>) {
          if (op.kind == OpKind::kCaughtOom) break;  // the floor: what the run needed, as it ran
        }
        const bool skipped = op.elastic && options.elastic == ElasticAllocs::kSkip;
        const BlockHandle h = skipped ? kNoBlock : model.malloc(op.size, op.stream, op.pool);
        if (op.kind == OpKind::kAlloc && h != kNoBlock) [[likely]] {
          handles[op.slot] = h;
          break;
        }
        if (op.elastic && options.elastic != ElasticAllocs::kServe) {
          // ATen catches the OutOfMemoryError and runs a plan with less workspace; none is the least it can ask.
          handles[op.slot] = kNoBlock;
          ++result.refused_elastic;
          break;
        }
        if (op.kind == OpKind::kCaughtOom) {
          // The caller catches the OutOfMemoryError and goes on. Served here, the memory is used
          // and given back by that caller before the trace goes on: freed at once.
          if (h == kNoBlock) {
            ++result.caught_ooms;
          } else {
            ++result.served_caught_ooms;
            model.free(h);
          }
          break;
        }
        const bool recorded_oom = op.kind == OpKind::kOom;
        if (h == kNoBlock) {
          if (!result.oom) {
            result.oom = true;
            result.oom_trace_index = op.trace_index;
            result.oom_request_bytes = op.size;
            result.oom_matches_recorded = recorded_oom;
          }
          // Past a recorded OOM the trace goes on with the failed step's clean-up; past any
          // other failure it assumes a block this replay does not have.
          stop = !recorded_oom;
        } else {
          result.passed_recorded_oom = true;
          stop = true;
        }
        break;
      }
      case OpKind::kFree:
        if (handles[op.slot] != kNoBlock) model.free(handles[op.slot]);
        handles[op.slot] = kNoBlock;
        break;
      case OpKind::kFreeRequested:
        if (handles[op.slot] != kNoBlock) model.free_requested(handles[op.slot]);
        break;
      case OpKind::kFreeCompleted:
        if (handles[op.slot] != kNoBlock) model.free_completed(handles[op.slot]);
        handles[op.slot] = kNoBlock;
        break;
      case OpKind::kEmptyCache:
        model.empty_cache();
        break;
    }
    if (self_check) {
      recorded.assign(trace.segment_events.begin() + segments_begin,
                      trace.segment_events.begin() + op.segment_end);
      if ((!simulated.empty() || !recorded.empty()) &&
          !same_segment_events(simulated, recorded)) {
        ++result.segment_mismatches;
        if (!result.first_mismatch_trace_index) result.first_mismatch_trace_index = op.trace_index;
      }
      simulated.clear();
    }
    hints_begin = op.hint_end;
    segments_begin = op.segment_end;
    return !stop;
  };

  // The ops run in stretches that end at the next capacity step or after a progress batch, so
  // that the loop over one stretch tests neither.
  std::size_t i = 0;
  while (i < ops.size() && !stop) {
    while (next_step < steps.size() && steps[next_step].from_trace_index <= ops[i].trace_index) {
      device.set_capacity(steps[next_step++].bytes);
    }
    std::size_t end = std::min(ops.size(), i + kProgressBatch);
    if (next_step < steps.size()) {
      const std::uint32_t step_at = steps[next_step].from_trace_index;
      end = static_cast<std::size_t>(
          std::find_if(ops.begin() + static_cast<std::ptrdiff_t>(i),
                       ops.begin() + static_cast<std::ptrdiff_t>(end),
                       [step_at](const Op& op) { return op.trace_index >= step_at; }) -
          ops.begin());
    }
    const std::size_t begin = i;
    for (; i < end;) {
      const Op& op = ops[i++];
      const bool go_on = replay_op(op);
      if constexpr (kRecords) {
        if (timeline_on) timeline.observe(i - 1, op.trace_index, stats.reserved_bytes, stats.allocated_bytes);
      }
      if (!go_on) break;
    }
    if (progress != nullptr) progress->add(i - begin);
  }
  const std::size_t replayed = i;
  if (progress != nullptr) progress->add(ops.size() - replayed);
  timeline.finish();
  result.ops_replayed = replayed;
  if (replayed) result.last_trace_index = ops[replayed - 1].trace_index;
  result.completed = !stop;
  result.stats = stats;
  result.timeline = std::move(timeline.points);
  result.memory_bytes = model.memory_bytes() + handles.capacity() * sizeof(BlockHandle) +
                        (simulated.capacity() + recorded.capacity()) * sizeof(alloc::SegmentEvent) +
                        result.timeline.capacity() * sizeof(TimelinePoint);
  return result;
}

template <typename Model>
ReplayResult replay_through(Model& model, alloc::DeviceMemory& device, const PreparedTrace& trace,
                            const ReplayOptions& options) {
  const bool records = options.self_check || options.timeline_points > 0;
  return records ? replay_through<Model, true>(model, device, trace, options)
                 : replay_through<Model, false>(model, device, trace, options);
}

}  // namespace

ReplayOptions replay_options_for(const Capacity& capacity) {
  ReplayOptions options;
  options.capacity = capacity.bytes;
  options.capacity_steps = capacity.steps;
  options.allowed_memory_maximum = capacity.allowed_maximum;
  options.device_total_memory = capacity.device_total;
  return options;
}

bool relays_initial_state(const PreparedTrace& trace, const alloc::AllocConfig& config) {
  return trace.starts_mid_run && config.expandable_segments &&
         std::any_of(trace.initial_segments.begin(), trace.initial_segments.end(),
                     [](const alloc::InitialSegment& s) { return !s.expandable; });
}

ReplayResult run_replay(const PreparedTrace& trace, ModelKind kind,
                        const alloc::AllocConfig& config, const ReplayOptions& options) {
  alloc::DeviceMemory device(options.capacity);
  try {
    if (kind == ModelKind::kIdeal) {
      alloc::IdealPacker model(config, device);
      return replay_through(model, device, trace, options);
    }
    alloc::CachingAllocatorOptions model_options;
    model_options.config = config;
    model_options.allowed_memory_maximum = options.allowed_memory_maximum;
    model_options.device_total_memory = options.device_total_memory;
    alloc::CachingAllocator model(model_options, device);
    return replay_through(model, device, trace, options);
  } catch (const alloc::AddressSpaceExhausted& e) {
    throw InputError(fmt::format("{}: {}", trace.source, e.what()));
  }
}

}  // namespace fragscope::replay

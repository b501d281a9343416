#pragma once
/// @file snapshot_builder.h
/// @brief Converts the pickle machine's values into the snapshot model while the file streams by.
///
/// Dicts are recognised by their keys as they are filled: `action` → a trace event;
/// `filename`+`line`+`name` → a frame; `total_size`+`blocks` → a segment; `size`+`state` (or
/// legacy `history`) → a block. Everything else (the top-level dict, allocator settings,
/// annotations) stays generic and is read by finish().
/// Thread-safety: one builder per reader.

#include <optional>
#include <span>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "snapshot/pickle_machine.h"
#include "snapshot/snapshot.h"

namespace fragscope::snapshot {

class SnapshotBuilder final : public pickle::Observer {
 public:
  /// @param out receives the snapshot; its string table must be the machine's.
  /// @param expected_size bytes of pickle expected (0 = unknown), to reserve up front.
  SnapshotBuilder(Snapshot& out, std::uint64_t expected_size);

  pickle::TypedRef claim_dict(pickle::Machine& machine, std::span<const pickle::Value> items) override;
  /// @brief About the bytes the model and the builder's tables hold (read_limits.h). Copies the
  /// builder makes of referenced values (a trace entry named twice) are checked with
  /// Machine::reserve_memory before they are made.
  std::uint64_t memory_bytes() const override;

  /// @brief Assembles `out` from the top-level value (a dict, or a legacy list of segments).
  /// @throws InputError when the top level is not a memory snapshot.
  void finish(pickle::Machine& machine, pickle::Value top);

  // --- Parts parsed apart (parallel_reader.h) ---
  /// @brief Where a part's strings, frames and stacks went in the builder that took it over.
  struct PartMaps {
    std::vector<StringId> strings;
    std::vector<FrameId> frames;
    std::vector<StackId> stacks;
    std::uint32_t first_event = 0;
  };
  /// @brief Whether `part`, the builder of a part parsed apart, can be taken over here, `m`
  /// being this builder's machine after Machine::can_absorb_part: it made only trace events
  /// (pushed at its top level), frames and stacks, and what it left to the taker (memo entries
  /// of earlier parts used as frames, file and function names, actions) is that here.
  bool can_absorb_part(const SnapshotBuilder& part, pickle::Machine& m, std::span<const pickle::PartOp> log) const;
  /// @brief Takes over `part`'s strings, frames, stacks and events, in their order.
  /// REQUIRES: can_absorb_part(part, m, log).
  void absorb_part(const SnapshotBuilder& part, pickle::Machine& m, PartMaps& maps);
  /// @brief In a part's builder, once its parse is done: readies it for can_absorb_part.
  void end_part();
  /// @brief The machine's translation of the part's values, by `maps` (which must outlive it).
  pickle::Machine::PartTranslation part_translation(const PartMaps& maps);

 private:
  enum Key : std::uint8_t {
    kAction, kAddr, kSize, kStream, kTimeUs, kFrames, kDeviceFree, kUserMetadata,
    kFilename, kLine, kName,
    kAddress, kRequestedSize, kState, kHistory, kRealSize,
    kDevice, kTotalSize, kAllocatedSize, kActiveSize, kSegmentType, kSegmentPoolId,
    kIsExpandable, kBlocks,
    kKeyCount
  };
  enum TypedKind : std::uint8_t { kFrameRef = 1, kStackRef, kBlockRef, kSegmentRef, kEventRef };
  // In a part's tables: a string or frame id with this bit is a memo index of an earlier part
  // (a kForeign value), resolved by the taker.
  static constexpr std::uint32_t kPartRef = std::uint32_t{1} << 31;
  /// A kForeign value's memo index as such an id.
  static std::uint32_t part_ref(pickle::Value foreign) {
    return kPartRef | static_cast<std::uint32_t>(foreign.payload());
  }
  /// An int as the machine holds it inline or wide (not kUInt64: a C++ size_t).
  static bool is_int(pickle::Value v) { return v.kind() == pickle::Kind::kInt || v.kind() == pickle::Kind::kWideInt; }
  /// An integer of 64 bits, signed or not (a cudaStream_t is a pointer: PyTorch may write it either way).
  static bool is_int64_bits(pickle::Value v) { return is_int(v) || v.kind() == pickle::Kind::kUInt64; }
  /// "an int", "a str", …: what a value is, for messages.
  static const char* kind_name(pickle::Kind kind);
  struct Fields {
    pickle::Value value[kKeyCount + 1];  // [kKeyCount]: where gather_like_last_event drops other keys' values
    std::uint32_t present = 0;
    bool has(Key k) const { return present & (1u << k); }
  };

  bool gather(std::span<const pickle::Value> items, Fields& fields) const;
  bool gather_like_last_event(std::span<const pickle::Value> items, Fields& fields) const;
  void remember_event_keys(std::span<const pickle::Value> items, const Fields& fields);
  pickle::TypedRef make_event(pickle::Machine& m, const Fields& f);
  pickle::TypedRef make_frame(pickle::Machine& m, const Fields& f);
  pickle::TypedRef make_block(pickle::Machine& m, const Fields& f);
  pickle::TypedRef make_segment(pickle::Machine& m, const Fields& f);
  StackId stack_of(pickle::Machine& m, pickle::Value frames, const char* what);
  StackId stack_of_other(pickle::Machine& m, pickle::Value frames, const char* what);
  TraceAction action_of(StringId name) {
    if (name < action_of_string_.size() && action_of_string_[name] != 0) [[likely]]
      return static_cast<TraceAction>(action_of_string_[name] - 1);
    return learn_action(name);
  }
  [[gnu::noinline]] TraceAction learn_action(StringId name);  // the first time a name is seen
  [[noreturn]] void bad_field(pickle::Machine& m, const Fields& f, Key k, const char* what, const char* expected) const;
  [[noreturn]] void negative_field(pickle::Machine& m, Key k, const char* what, std::int64_t value) const;
  std::uint64_t uint_field(pickle::Machine& m, const Fields& f, Key k, const char* what) const;
  /// An int of 64 bits as unsigned, whether written signed or not (a cudaStream_t).
  std::uint64_t bits_field(pickle::Machine& m, const Fields& f, Key k, const char* what) const;
  std::int64_t int_field(pickle::Machine& m, const Fields& f, Key k, const char* what) const;
  StringId string_field(pickle::Machine& m, const Fields& f, Key k, const char* what) const;
  /// string_field(), or in a part a kPartRef id for a string of an earlier part.
  StringId string_or_part_ref(pickle::Machine& m, const Fields& f, Key k, const char* what) const;
  /// A part's kPartRef string id as the taker's string id; false when it is not a string there.
  static bool resolve_string(pickle::Machine& m, StringId id, const PartMaps* maps, StringId& out);

  void read_settings(pickle::Machine& m, pickle::Value settings);
  void read_annotations(pickle::Machine& m, pickle::Value list);
  void read_segment_list(pickle::Machine& m, pickle::Value list, const char* what);
  void read_traces(pickle::Machine& m, pickle::Value list);
  /// Settings and annotation values as text, for values this version does not interpret.
  std::string text_of(pickle::Machine& m, pickle::Value v, int depth = 0) const;

  Snapshot& out_;
  StringId key_ids_[kKeyCount];
  std::vector<std::int8_t> key_of_string_;  // StringId → Key, -1 when not a known key
  std::vector<std::uint8_t> action_of_string_;  // StringId → TraceAction + 1, 0 = not yet seen
  StringId state_allocated_, state_pending_, state_inactive_, type_small_;
  static constexpr std::uint64_t kNoAddress = ~std::uint64_t{0};
  // The keys of the last trace entry in order, and the Key at each position (kKeyCount: not one
  // we read). Entries of one snapshot list the same keys in the same order, so the next entry's
  // keys are compared, not looked up one by one.
  struct EventKeys {
    static constexpr std::size_t kMax = 16;
    std::size_t count = 0;  // 0: none remembered
    pickle::Value keys[kMax];
    std::uint8_t key_at[kMax];
    std::uint32_t present = 0;
  };
  EventKeys last_event_keys_;
  std::vector<Block> staged_blocks_;
  std::vector<Segment> staged_segments_;
  TraceEventList staged_events_;
  // The device whose trace is all staged events in order: finish() moves them there (a device
  // list read after it may refer to the same events).
  std::optional<std::size_t> move_events_to_;
  std::vector<FrameId> frame_ids_scratch_;
  // Stacks by the values of the frames list they came from: a snapshot may pickle a fresh list
  // for every entry (memo references to shared frame dicts), and equal values are the same,
  // already checked, frames. Hash of the values → the stack and where its values are kept.
  struct ListOfStack {
    StackId stack;
    std::uint32_t offset;  // in list_values_
    std::uint32_t length;
  };
  static constexpr std::size_t kMaxListValues = std::size_t{1} << 22;  // 32 MiB: then no more
  std::optional<StackId> cached_stack(std::uint64_t hash, std::span<const pickle::Value> items) const;
  void cache_stack(std::uint64_t hash, std::span<const pickle::Value> items, StackId stack);
  absl::flat_hash_map<std::uint64_t, ListOfStack> stack_by_list_hash_;
  std::vector<pickle::Value> list_values_;
  // A part's events' kPartRef actions and frames lists (a repeat of the last one not again).
  std::vector<StringId> part_ref_strings_;
  std::vector<StackId> part_ref_stacks_;
  std::uint64_t copied_events_ = 0;  // trace entries copied into device traces
  std::uint64_t other_bytes_ = 0;    // settings kept as text, annotations
};

}  // namespace fragscope::snapshot

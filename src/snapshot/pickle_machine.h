#pragma once
/// @file pickle_machine.h
/// @brief A pickle virtual machine that only builds data: it never imports, calls or
/// constructs anything, and refuses every opcode that would.
///
/// Supports protocols 2–5 as CPython writes them for builtins: FRAME, MARK, dict/list/tuple/set
/// building, str/bytes, ints of any width, floats, bools, None, and the memo (MEMOIZE, BINPUT,
/// BINGET and their long forms). Shared objects stay shared: a memo hit yields a reference to
/// the same object, never a copy.
///
/// An Observer may "claim" a dict when its items arrive, turning it into a compact typed handle
/// (a trace event, a block, a frame...). This is how a 1 GB snapshot is converted while it
/// streams by, without a generic tree of millions of dicts.
///
/// A machine can also parse a part of a stream on its own thread (start_part, run_part), and
/// another take that part over where it reaches it (can_absorb_part, absorb_part): the reader
/// in parts, parallel_reader.h.
///
/// Limits (hostile input): strings up to 256 MiB; at most 2^28 values on the stack, in the memo,
/// as objects and as container items (each), 2^20 open MARKs; deep nesting costs no native stack
/// (the machine is iterative). Memory: what the machine and its observer hold stays within
/// ReadLimits (read_limits.h), checked whenever a count has grown by kCheckpointStep since the
/// last check, so a check costs nothing on the hot path and overshoots by a few MiB at most.
/// Thread-safety: one machine per thread.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "snapshot/byte_source.h"
#include "snapshot/pickle_value.h"
#include "snapshot/read_limits.h"
#include "snapshot/string_table.h"
#include "snapshot/value_stack.h"
#include "util/huge_pages.h"

namespace fragscope::snapshot::pickle {

/// @brief A claimed dict: an observer-defined type tag (1 to 255) and index. Type 0, the
/// default, is no claim.
struct TypedRef {
  std::uint8_t type = 0;
  std::uint32_t index = 0;
};

enum class ObjectKind : std::uint8_t { kList, kDict, kTuple, kTyped };

/// @brief What a part parsed apart (Machine::run_part) did at its top level, in order, for the
/// machine that takes it over to replay: a MARK, an APPENDS, or `count` typed values of `type`
/// pushed, whose indices run from `first`.
struct PartOp {
  enum Kind : std::uint8_t { kMark, kAppends, kPush } kind;
  std::uint8_t type = 0;
  std::uint32_t first = 0;
  std::uint32_t count = 0;
};

/// @brief Why Machine::run_part stopped, at its top level.
enum class PartEnd : std::uint8_t {
  kReachedStop,  ///< at the stop offset
  kOtherOpcode,  ///< before an opcode a part does not take at its top level
  kEndOfInput,   ///< the input ended (the whole-file parse will say how)
};

class Machine;

/// @brief Sees dicts as they are filled and may claim them.
class Observer {
 public:
  virtual ~Observer() = default;
  /// @brief A dict received its first items (k0, v0, k1, v1, ...). Return a handle to claim it
  /// (the dict then exists only as that handle), or TypedRef{} (type 0) to keep it as a generic
  /// dict. (Not std::optional: its 12 bytes came back through memory, and reading them stalled.)
  /// @throws InputError when the dict has a known shape but bad contents.
  virtual TypedRef claim_dict(Machine& machine, std::span<const Value> items) = 0;
  /// @brief About the bytes the observer holds, for the read's memory budget (read_limits.h).
  virtual std::uint64_t memory_bytes() const { return 0; }
};

class Machine {
 public:
  /// @param source the decompressed pickle stream.
  /// @param name names the input in errors.
  /// @param strings receives every str and bytes value (interned).
  /// @param observer may claim dicts; may be null.
  /// @param progress called about every 16 MiB of pickle consumed (may be empty).
  /// @param limits what the machine and the observer may hold (read_limits.h).
  Machine(ByteSource& source, std::string name, StringTable& strings, Observer* observer,
          std::function<void()> progress = {}, ReadLimits limits = {});

  /// @brief Runs to STOP and returns the top-level value.
  /// @throws InputError on truncated, corrupt or code-executing input, naming the input and the
  ///         byte offset.
  Value run();
  /// @brief run(), but returns false (and nothing in `top`) where the source pauses
  /// (ByteSource::paused()) between two opcodes; resume_at() then continues. A pause inside an
  /// opcode is lifted and reading goes on.
  /// @throws InputError as run().
  bool run_until_pause(Value& top);
  /// @brief After a pause: continue at `offset` of the stream, where the source now is.
  void resume_at(std::uint64_t offset);

  // --- A part of a stream parsed apart (parallel_reader.h) ---
  /// @brief Makes this machine parse a part that starts at stream offset `start` (an opcode
  /// boundary) after `memo_base` memo entries. A memo reference below `memo_base` yields
  /// `known_before[index]` when that is a value (strings the splitter read), else a kForeign
  /// value for the taker to resolve. REQUIRES: before any run.
  void start_part(std::uint64_t start, std::uint64_t memo_base, std::span<const Value> known_before);
  /// @brief Parses top-level values of the part (each a dict, which the observer must claim),
  /// MARKs and APPENDS, logging them in `log` instead of applying them, until the first top-level
  /// point at or after `stop()` (asked once `offset()` reaches `nominal_stop`), an opcode other
  /// than those, or the end of the input.
  /// @throws InputError on anything the part cannot decide alone (the whole-file parse then reads
  ///         these bytes itself) or that a whole-file parse would fail on.
  PartEnd run_part(std::uint64_t nominal_stop, const std::function<std::uint64_t()>& stop,
                   std::vector<PartOp>& log);
  /// @brief Memo indices below the part's base that the part referred to, ascending.
  std::vector<std::uint64_t> foreign_references() const;

  /// @brief The taker's translation of a part's strings and typed handles (absorb_part). A
  /// run of typed values pushed at the part's top level translates to consecutive indices.
  struct PartTranslation {
    std::function<StringId(StringId)> string;
    std::function<TypedRef(TypedRef)> typed;
  };
  /// @brief Whether a part's memo holds only what absorb_part translates (strings, small
  /// scalars, typed objects, references to earlier parts). Run by the part's thread.
  bool part_memo_takeable() const;
  /// @brief Whether `part` (run_part done, started at this machine's offset) can be taken over:
  /// the memo sizes agree, every foreign reference names a stored entry here, and the logged
  /// MARKs and APPENDS succeed here. REQUIRES: part.part_memo_takeable().
  bool can_absorb_part(const Machine& part, std::span<const PartOp> log) const;
  /// @brief Takes `part` over: its memo entries follow this memo, each made a value here only
  /// when a reference needs it, and the log is replayed on this stack. Reading continues at
  /// `part.offset()` (call resume_at). REQUIRES: can_absorb_part(part, log); `part` and what
  /// `translate` refers to outlive this machine's reading.
  void absorb_part(const Machine& part, std::span<const PartOp> log, PartTranslation translate);
  /// @brief Memo entry `index` as a typed handle; type 0 when it is not one.
  /// REQUIRES: index < this machine's memo size, not a hole.
  TypedRef memo_typed(std::uint64_t index);
  /// @brief Whether memo entry `index` is a string (then its id is in `id`).
  /// REQUIRES: index < this machine's memo size, not a hole.
  bool memo_string(std::uint64_t index, StringId& id);

  // --- Inspecting values (for observers and the caller) ---
  Kind kind(Value v) const { return v.kind(); }
  /// @brief The integer value. REQUIRES: kind is kInt, kWideInt or kBool.
  std::int64_t to_int(Value v) const {
    if (v.kind() == Kind::kInt) [[likely]] return v.inline_value();  // inline: a few per trace entry
    return boxed_int(v);
  }
  /// @brief The value of an integer of 64 bits or fewer, as unsigned (a negative one as its two's
  /// complement). REQUIRES: kind is kInt, kWideInt or kUInt64.
  std::uint64_t to_uint(Value v) const {
    if (v.kind() == Kind::kUInt64) return static_cast<std::uint64_t>(wide_ints_[v.payload()]);
    return static_cast<std::uint64_t>(to_int(v));
  }
  /// @brief The float value; ints convert. REQUIRES: kind is kFloat, kInt, kWideInt or kUInt64.
  double to_float(Value v) const;
  ObjectKind object_kind(Value v) const { return objects_[v.payload()].kind; }
  TypedRef typed(Value v) const {
    const Object& o = objects_[v.payload()];
    return {o.typed_type, o.index};
  }
  /// @brief Items of a generic list / tuple (values) or dict (k0, v0, k1, v1, ...).
  std::span<const Value> items(Value v) const {
    const Object& o = objects_[v.payload()];
    if (o.kind == ObjectKind::kTyped || o.index == kNoStorage) return {};
    return storage_[o.index];
  }
  /// @brief Turns a generic object into a typed handle (e.g. a frame list into a stack id),
  /// so later references to the same object reuse the conversion.
  void retype(Value v, TypedRef ref) {
    Object& o = objects_[v.payload()];
    if (o.kind != ObjectKind::kTyped && o.index != kNoStorage) release_storage(o.index);
    o = {ObjectKind::kTyped, ref.type, ref.index};
  }
  /// @brief Bytes of pickle consumed so far (decompressed).
  std::uint64_t offset() const { return base_offset_ + pos_; }
  const std::string& name() const { return name_; }
  /// @brief Throws InputError "NAME: MESSAGE (at byte N)".
  [[noreturn]] [[gnu::noinline, gnu::cold]] void fail(const std::string& message) const;
  /// @brief Bytes of pickle the source expects in all (0 when unknown), for reservations.
  std::uint64_t expected_size() const { return source_.expected_size(); }
  /// @brief About the bytes the machine, its observer and the parts it took over hold.
  std::uint64_t memory_bytes() const;
  /// @brief Checks that `bytes` more (an observer about to copy) stay within the limits.
  /// @throws InputError "NAME: reading needs more than N of memory ..." when they do not.
  void reserve_memory(std::uint64_t bytes) { check_memory(bytes); }

 private:
  struct Object {
    ObjectKind kind;
    std::uint8_t typed_type;
    std::uint32_t index;  // typed: observer's index; generic: storage slot or kNoStorage
  };
  static constexpr std::uint32_t kNoStorage = 0xffffffffu;
  static constexpr std::uint64_t kMaxValues = std::uint64_t{1} << 28;  // each of: stack, memo, objects, items
  static constexpr std::size_t kMaxOpenMarks = std::size_t{1} << 20;
  static constexpr std::uint64_t kCheckpointStep = std::uint64_t{1} << 16;  // values (strings: bytes / 16)
  // The large arrays live on huge pages (util/huge_pages.h): fewer page faults.
  using Values = std::vector<Value, HugePageAllocator<Value>>;

  /// Makes at least `need` bytes readable at data_ + pos_; false when the input ends first, or
  /// (at an opcode's start) where the source pauses.
  bool refill(std::size_t need, bool opcode_start = false);
  /// Runs one opcode (not STOP) read at data_[pos_ - 1].
  void step(std::uint8_t op);
  void report_progress();
  /// Throws when what is held (plus `extra`) passes the limits; sets the next checkpoints.
  [[gnu::noinline]] void check_memory(std::uint64_t extra = 0);
  std::uint64_t machine_bytes() const;  // memory_bytes() but the strings, observer and parts
  [[noreturn]] [[gnu::noinline, gnu::cold]] void fail_memory(std::uint64_t needed, std::uint64_t allowed) const;
  void need(std::size_t n, const char* what);
  std::uint64_t read_le(std::size_t n);
  void push(Value v);
  [[gnu::noinline]] void grow_stack();
  void count_stored(std::size_t n);
  Value pop();
  Value& top();
  std::size_t pop_mark();
  Value new_object(ObjectKind kind);
  Value typed_object(TypedRef ref);
  Values& storage_of(std::uint64_t object);
  void release_storage(std::uint32_t slot);
  void add_dict_items(Value dict, std::span<const Value> items);
  void complete_fresh_dict(Value dict, std::span<const Value> items);
  void append_items(std::uint64_t object, std::span<const Value> items);
  void add_list_items(Value list, std::span<const Value> items);
  Value make_tuple(std::span<const Value> items);
  Value make_int(std::int64_t v);
  [[gnu::noinline]] Value make_wide_int(std::int64_t v);
  Value read_long(std::size_t n);
  Value read_string(std::size_t n);
  template <bool kInPart>
  bool fill_dict_inline(Value dict);
  void memo_put(std::uint64_t index);
  Value memo_get(std::uint64_t index);
  [[gnu::noinline]] Value memo_get_other(std::uint64_t index);
  Value entry_before_part(std::uint64_t index);
  Value resolve_deferred(std::uint64_t local);
  /// Memo entry `index` of a machine that took parts over, made a value if deferred.
  Value memo_value(std::uint64_t index) {
    return memo_[index].kind() == Kind::kDeferred ? resolve_deferred(index) : memo_[index];
  }
  std::int64_t boxed_int(Value v) const;
  [[noreturn]] [[gnu::noinline, gnu::cold]] void fail_too_many() const;
  [[noreturn]] [[gnu::noinline, gnu::cold]] void fail_underflow() const;
  [[noreturn]] [[gnu::noinline, gnu::cold]] void refuse(const char* opcode, const char* why) const;

  ByteSource& source_;
  std::string name_;
  StringTable& strings_;
  Observer* observer_;
  std::function<void()> progress_;
  std::uint64_t next_progress_ = 0;

  // Input: the parser reads data_[pos_, end_), a window into the borrowed chunk_ or, where an
  // opcode spans chunks, into stitch_ (a copy of the unread tail plus the next chunk's start).
  // The last from_chunk_ bytes of stitch_ are chunk_[resume_ - from_chunk_, resume_): once the
  // unread part of stitch_ is no longer than that, reading moves back to chunk_.
  const std::uint8_t* data_ = nullptr;
  std::size_t pos_ = 0;
  std::size_t end_ = 0;
  std::uint64_t base_offset_ = 0;  // offset of data_[0] in the pickle stream
  std::span<const std::uint8_t> chunk_;
  std::uint64_t chunk_offset_ = 0;  // offset of chunk_[0] in the pickle stream
  std::vector<std::uint8_t> stitch_;
  std::vector<std::uint8_t> scratch_;
  bool in_stitch_ = false;
  std::size_t from_chunk_ = 0;
  std::size_t resume_ = 0;
  bool eof_ = false;

  ValueStack stack_;
  std::vector<std::size_t> marks_;
  Values memo_;
  std::vector<Object, HugePageAllocator<Object>> objects_;
  std::vector<Values> storage_;
  std::vector<std::uint32_t> free_storage_;  // slots of retyped objects, reused
  std::vector<std::int64_t> wide_ints_;
  std::vector<double> floats_;
  std::uint64_t stored_values_ = 0;  // items held in containers' storage
  std::uint64_t objects_made_ = 0;   // objects the opcodes made (here and in parts taken over)

  // The memory budget: each count is checked against the limits when it reaches its checkpoint.
  ReadLimits limits_;
  std::uint64_t memo_checkpoint_ = 0;
  std::uint64_t objects_checkpoint_ = 0;
  std::uint64_t stored_checkpoint_ = 0;
  std::uint64_t scalars_checkpoint_ = 0;  // wide ints and floats
  std::uint64_t strings_checkpoint_ = 0;  // bytes the string table holds
  std::uint64_t absorbed_bytes_ = 0;     // what the parts taken over hold
  std::uint64_t stored_high_ = 0;        // the most stored_values_ was at a check
  std::uint64_t first_offset_ = 0;       // where reading began (a part's start)

  // A part (start_part): memo_[i] is memo entry memo_base_ + i; entries below come from
  // known_before_ or are foreign (noted in foreign_seen_, one bit each).
  bool started_ = false;  // the PROTO check is done
  bool in_part_ = false;
  std::uint64_t memo_base_ = 0;
  std::vector<Value> known_before_;
  std::vector<std::uint64_t> foreign_seen_;
  // Parts taken over; a kDeferred memo entry is (index here << 32 | the part's memo index).
  struct AbsorbedPart {
    const Machine* part;
    PartTranslation translate;
  };
  std::vector<AbsorbedPart> absorbed_;
};

}  // namespace fragscope::snapshot::pickle

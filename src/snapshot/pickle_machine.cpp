// One concept needs this length: the pickle VM. Its opcode dispatch, the dict-body fast path, the
// stack, memo and object helpers they inline, and a part's run (parallel_reader.h), which reads its
// trace entries through that same fast path, share one file: split, the hot loops lose their inlining.
#include "snapshot/pickle_machine.h"

#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "util/bytes.h"
#include "util/error.h"
#include "util/little_endian.h"

namespace fragscope::snapshot::pickle {

namespace {

/// The value of `n` little-endian bytes of two's complement (LONG1, LONG4). REQUIRES: n <= 8.
inline std::int64_t twos_complement(std::uint64_t raw, std::size_t n) {
  if (n > 0 && n < 8 && (raw >> (8 * n - 1)) & 1) raw |= ~std::uint64_t{0} << (8 * n);  // negative
  return static_cast<std::int64_t>(raw);
}

constexpr std::size_t kChunk = 1 << 20;
constexpr std::size_t kMaxString = std::size_t{256} << 20;
constexpr std::uint64_t kProgressEvery = std::uint64_t{16} << 20;
constexpr std::uint64_t kMaxMemoGap = 1 << 16;

// Opcodes (CPython Lib/pickle.py).
enum : std::uint8_t {
  MARK = '(', STOP = '.', POP = '0', POP_MARK = '1', DUP = '2', FLOAT = 'F', INT = 'I',
  BININT = 'J', BININT1 = 'K', LONG = 'L', BININT2 = 'M', NONE = 'N', PERSID = 'P',
  BINPERSID = 'Q', REDUCE = 'R', STRING = 'S', BINSTRING = 'T', SHORT_BINSTRING = 'U',
  UNICODE = 'V', BINUNICODE = 'X', APPEND = 'a', BUILD = 'b', GLOBAL = 'c', DICT = 'd',
  EMPTY_DICT = '}', APPENDS = 'e', GET = 'g', BINGET = 'h', INST = 'i', LONG_BINGET = 'j',
  LIST = 'l', EMPTY_LIST = ']', OBJ = 'o', PUT = 'p', BINPUT = 'q', LONG_BINPUT = 'r',
  SETITEM = 's', TUPLE = 't', EMPTY_TUPLE = ')', SETITEMS = 'u', BINFLOAT = 'G',
  BINBYTES = 'B', SHORT_BINBYTES = 'C',
  PROTO = 0x80, NEWOBJ = 0x81, EXT1 = 0x82, EXT2 = 0x83, EXT4 = 0x84, TUPLE1 = 0x85,
  TUPLE2 = 0x86, TUPLE3 = 0x87, NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a, LONG4 = 0x8b,
  SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d, BINBYTES8 = 0x8e, EMPTY_SET = 0x8f,
  ADDITEMS = 0x90, FROZENSET = 0x91, NEWOBJ_EX = 0x92, STACK_GLOBAL = 0x93, MEMOIZE = 0x94,
  FRAME = 0x95, BYTEARRAY8 = 0x96, NEXT_BUFFER = 0x97, READONLY_BUFFER = 0x98,
};

}  // namespace

Machine::Machine(ByteSource& source, std::string name, StringTable& strings, Observer* observer,
                 std::function<void()> progress, ReadLimits limits)
    : source_(source), name_(std::move(name)), strings_(strings), observer_(observer),
      progress_(std::move(progress)), limits_(limits) {
  // Reserving address space costs no memory until touched, and spares the copies of growth.
  // A snapshot holds about one memo entry per 30 bytes of pickle and one object per 50.
  const std::uint64_t expected = std::min<std::uint64_t>(source_.expected_size(), std::uint64_t{1} << 36);
  memo_.reserve(expected / 24);
  objects_.reserve(expected / 40);
  check_memory();  // sets the first checkpoints
}

std::uint64_t Machine::memory_bytes() const {
  return machine_bytes() + strings_.memory_bytes() + (observer_ ? observer_->memory_bytes() : 0) + absorbed_bytes_;
}

std::uint64_t Machine::machine_bytes() const {
  // Container items: a vector may hold twice what it stores, and a retyped object's storage
  // keeps its capacity for reuse, so the most ever stored counts twice.
  return stack_.capacity() * sizeof(Value) + marks_.capacity() * sizeof(std::size_t) + memo_.size() * sizeof(Value) +
         objects_.size() * sizeof(Object) + storage_.size() * sizeof(Values) + 2 * stored_high_ * sizeof(Value) +
         (wide_ints_.size() + floats_.size()) * 8 + stitch_.capacity() + scratch_.capacity() +
         (known_before_.size() + foreign_seen_.size()) * 8;
}

void Machine::check_memory(std::uint64_t extra) {
  if (memo_.size() >= kMaxValues || objects_made_ >= kMaxValues || stored_values_ > kMaxValues) fail_too_many();
  stored_high_ = std::max(stored_high_, stored_values_);
  const std::uint64_t held = memory_bytes() + extra;
  const std::uint64_t allowed = limits_.allowed(offset() - first_offset_);
  if (held > allowed) fail_memory(held, allowed);
  memo_checkpoint_ = std::min(kMaxValues, memo_.size() + kCheckpointStep);
  objects_checkpoint_ = std::min(kMaxValues, objects_made_ + kCheckpointStep);
  stored_checkpoint_ = std::min(kMaxValues, stored_values_ + kCheckpointStep);
  scalars_checkpoint_ = wide_ints_.size() + floats_.size() + kCheckpointStep;
  strings_checkpoint_ = strings_.memory_bytes() + kCheckpointStep * 16;
}

void Machine::fail_memory(std::uint64_t needed, std::uint64_t allowed) const {
  const std::uint64_t read = offset() - first_offset_;
  if (allowed >= limits_.max_memory)
    fail(fmt::format("reading needs more than {} of memory, the most a read may use (--max-memory SIZE raises it)",
                     format_bytes(allowed)));
  fail(fmt::format("reading needs more than {} of memory for {} of pickle read, more than {} times that plus {}: "
                   "a model far larger than its file (hostile or corrupt snapshot; --max-memory SIZE reads a file "
                   "you trust within SIZE)",
                   format_bytes(needed), format_bytes(read), kMemoryPerPickleByte, format_bytes(kMemoryFloor)));
}

void Machine::fail(const std::string& message) const {
  throw InputError(fmt::format("{}: {} (at byte {})", name_, message, offset()));
}

void Machine::refuse(const char* opcode, const char* why) const {
  throw InputError(fmt::format("{}: refusing to load: pickle opcode {} {} (at byte {})", name_,
                               opcode, why, offset() - 1));
}

void Machine::fail_too_many() const { fail("too many values (hostile or corrupt pickle)"); }
void Machine::fail_underflow() const { fail("corrupt pickle: stack underflow"); }

bool Machine::refill(std::size_t need, bool opcode_start) {
  if (end_ - pos_ >= need) return true;
  if (in_stitch_ && end_ - pos_ <= from_chunk_) {  // the rest of stitch_ is in chunk_: go back
    const std::size_t unread = end_ - pos_;
    in_stitch_ = false;
    data_ = chunk_.data();
    pos_ = resume_ - unread;
    end_ = chunk_.size();
    base_offset_ = chunk_offset_;
    if (end_ - pos_ >= need) return true;
  }
  if (eof_) {
    // A pause is only a stop between opcodes; inside one, the bytes after it follow.
    if (opcode_start || !source_.paused()) return false;
    source_.lift_pause();
    eof_ = false;
  }
  // Gather the unread bytes, then whole or partial chunks, until `need` bytes are contiguous.
  const std::uint64_t offset = base_offset_ + pos_;
  scratch_.assign(data_ + pos_, data_ + end_);
  std::size_t from_chunk = in_stitch_ ? std::min(from_chunk_, end_ - pos_) : end_ - pos_;
  if (in_stitch_) {
    scratch_.insert(scratch_.end(), chunk_.begin() + static_cast<std::ptrdiff_t>(resume_), chunk_.end());
    from_chunk += chunk_.size() - resume_;
  }
  std::size_t resume = chunk_.size();
  while (scratch_.size() < need) {
    chunk_offset_ += chunk_.size();
    chunk_ = source_.next_chunk();
    if (chunk_.empty() && !opcode_start && source_.paused()) {
      source_.lift_pause();
      continue;
    }
    if (chunk_.empty()) {
      eof_ = true;
      from_chunk = resume = 0;
      break;
    }
    if (scratch_.empty() && chunk_.size() >= need) {  // nothing to stitch: read the chunk in place
      in_stitch_ = false;
      data_ = chunk_.data();
      pos_ = 0;
      end_ = chunk_.size();
      base_offset_ = chunk_offset_;
      report_progress();
      return true;
    }
    // Copy a little beyond `need`, so that reading soon moves back to the chunk.
    constexpr std::size_t kStitchSlack = 64;
    resume = from_chunk = std::min(chunk_.size(), need - scratch_.size() + kStitchSlack);
    scratch_.insert(scratch_.end(), chunk_.begin(), chunk_.begin() + static_cast<std::ptrdiff_t>(resume));
  }
  stitch_.swap(scratch_);
  in_stitch_ = true;
  from_chunk_ = from_chunk;
  resume_ = resume;
  data_ = stitch_.data();
  pos_ = 0;
  end_ = stitch_.size();
  base_offset_ = offset;
  report_progress();
  return end_ >= need;
}

void Machine::report_progress() {
  if (progress_ && base_offset_ + end_ >= next_progress_) {
    next_progress_ = base_offset_ + end_ + kProgressEvery;
    progress_();
  }
}

inline void Machine::need(std::size_t n, const char* what) {
  if (end_ - pos_ < n && !refill(n)) [[unlikely]] fail(fmt::format("truncated pickle: input ends inside {}", what));
}

inline std::uint64_t Machine::read_le(std::size_t n) {
  const std::uint64_t v = load_little_endian(data_ + pos_, n, end_ - pos_);
  pos_ += n;
  return v;
}

[[gnu::always_inline]] inline void Machine::push(Value v) {
  if (stack_.full()) [[unlikely]]
    grow_stack();
  stack_.push_unchecked(v);
}

void Machine::grow_stack() {
  if (stack_.size() >= kMaxValues) fail_too_many();
  check_memory(stack_.capacity() * 2 * sizeof(Value));  // the new array, while the old is copied
  stack_.grow();
}

void Machine::count_stored(std::size_t n) {
  stored_values_ += n;
  if (stored_values_ > stored_checkpoint_) [[unlikely]]
    check_memory();
}

inline Value Machine::pop() {
  if (stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size())) [[unlikely]]
    fail_underflow();
  Value v = stack_.back();
  stack_.pop_back();
  return v;
}

inline Value& Machine::top() {
  if (stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size())) [[unlikely]]
    fail_underflow();
  return stack_.back();
}

std::size_t Machine::pop_mark() {
  if (marks_.empty()) fail("corrupt pickle: MARK expected");
  const std::size_t m = marks_.back();
  marks_.pop_back();
  return m;
}

inline Value Machine::new_object(ObjectKind kind) {
  if (objects_made_ >= objects_checkpoint_) [[unlikely]]
    check_memory();
  ++objects_made_;
  objects_.push_back({kind, 0, kNoStorage});
  return Value::make(Kind::kObject, objects_.size() - 1);
}

Machine::Values& Machine::storage_of(std::uint64_t object) {
  Object& o = objects_[object];
  if (o.index == kNoStorage) {
    if (!free_storage_.empty()) {
      o.index = free_storage_.back();
      free_storage_.pop_back();
    } else {
      o.index = static_cast<std::uint32_t>(storage_.size());
      storage_.emplace_back();
    }
  }
  return storage_[o.index];
}

void Machine::release_storage(std::uint32_t slot) {
  stored_values_ -= storage_[slot].size();
  storage_[slot].clear();  // keeps its capacity for the next list (most are frame lists)
  free_storage_.push_back(slot);
}

void Machine::add_dict_items(Value dict, std::span<const Value> items) {
  if (dict.kind() != Kind::kObject) fail("corrupt pickle: SETITEM(S) target is not a dict");
  if (objects_[dict.payload()].kind == ObjectKind::kTyped)
    fail("corrupt pickle: items added to a dict after it was complete");
  if (objects_[dict.payload()].kind != ObjectKind::kDict) fail("corrupt pickle: SETITEM(S) target is not a dict");
  if (items.size() % 2) fail("corrupt pickle: SETITEMS with an odd number of values");
  if (objects_[dict.payload()].index == kNoStorage) complete_fresh_dict(dict, items);
  else append_items(dict.payload(), items);
}

// REQUIRES: `dict` is a dict that has no items yet; items.size() is even.
inline void Machine::complete_fresh_dict(Value dict, std::span<const Value> items) {
  if (observer_) {
    if (const TypedRef ref = observer_->claim_dict(*this, items); ref.type != 0) {
      objects_[dict.payload()] = {ObjectKind::kTyped, ref.type, ref.index};
      return;
    }
  }
  append_items(dict.payload(), items);
}

void Machine::append_items(std::uint64_t object, std::span<const Value> items) {
  auto& storage = storage_of(object);
  count_stored(items.size());
  storage.insert(storage.end(), items.begin(), items.end());
}

void Machine::add_list_items(Value list, std::span<const Value> items) {
  if (list.kind() != Kind::kObject || objects_[list.payload()].kind != ObjectKind::kList)
    fail("corrupt pickle: APPEND(S)/ADDITEMS target is not a list or set");
  append_items(list.payload(), items);
}

Value Machine::make_tuple(std::span<const Value> items) {
  Value t = new_object(ObjectKind::kTuple);
  if (!items.empty()) append_items(t.payload(), items);
  return t;
}

inline Value Machine::make_int(std::int64_t v) {
  if (v >= Value::kInlineMin && v <= Value::kInlineMax) [[likely]] return Value::inline_int(v);
  return make_wide_int(v);
}

Value Machine::make_wide_int(std::int64_t v) {
  if (wide_ints_.size() + floats_.size() >= scalars_checkpoint_) check_memory();
  wide_ints_.push_back(v);
  return Value::make(Kind::kWideInt, wide_ints_.size() - 1);
}

std::int64_t Machine::boxed_int(Value v) const {
  switch (v.kind()) {
    case Kind::kWideInt: return wide_ints_[v.payload()];
    case Kind::kBool: return static_cast<std::int64_t>(v.payload());
    default: return 0;
  }
}

double Machine::to_float(Value v) const {
  if (v.kind() == Kind::kFloat) return floats_[v.payload()];
  if (v.kind() == Kind::kUInt64) return static_cast<double>(to_uint(v));
  return static_cast<double>(to_int(v));
}

[[gnu::always_inline]] inline Value Machine::read_long(std::size_t n) {
  // n-byte little-endian two's complement. 9 bytes ending in 0: an unsigned 64-bit value (how
  // Python writes 2^63 to 2^64 − 1). Anything wider: kept only as "huge".
  if (n == 0) return Value::inline_int(0);
  if (n == 9) [[unlikely]] {
    need(9, "LONG1");
    if (data_[pos_ + 8] == 0) {
      const std::uint64_t bits = read_le(8);
      pos_ += 1;
      if (bits >> 63) {
        wide_ints_.push_back(static_cast<std::int64_t>(bits));
        return Value::make(Kind::kUInt64, wide_ints_.size() - 1);
      }
      return make_int(static_cast<std::int64_t>(bits));  // not minimal, still a 64-bit value
    }
  }
  if (n > 8) [[unlikely]] {
    while (n > 0) {  // skip in chunks; never buffer a hostile length whole
      const std::size_t step = std::min(n, kChunk);
      need(step, "LONG");
      pos_ += step;
      n -= step;
    }
    return Value::make(Kind::kHugeInt, 0);
  }
  need(n, "LONG1");
  return make_int(twos_complement(read_le(n), n));
}

Value Machine::read_string(std::size_t n) {
  if (n > kMaxString) fail(fmt::format("string length {} exceeds the 256 MiB limit", n));
  // A long string is gathered whole (twice, while it is stitched from chunks) and then kept: 3n
  // held, while its n bytes of pickle allow 2n more.
  if (n > kChunk || strings_.memory_bytes() >= strings_checkpoint_) [[unlikely]]
    check_memory(n > kChunk ? n : 0);
  need(n, "a string");
  const std::string_view text(reinterpret_cast<const char*>(data_ + pos_), n);
  pos_ += n;
  return Value::make(Kind::kString, strings_.intern(text));
}

inline void Machine::memo_put(std::uint64_t index) {
  const Value v = top();
  if (index == memo_.size()) [[likely]] {
    if (memo_.size() >= memo_checkpoint_) [[unlikely]]
      check_memory();
    memo_.push_back(v);
    return;
  }
  if (index < memo_.size()) {
    memo_[index] = v;
    return;
  }
  // Pickler memo indices are dense: each entry took at least one byte of input, so an index
  // beyond the bytes read so far is hostile (it would make a few bytes allocate gigabytes).
  if (index - memo_.size() > kMaxMemoGap || index >= offset()) fail(fmt::format("memo index {} out of range", index));
  if (index >= memo_checkpoint_) check_memory((index + 1 - memo_.size()) * sizeof(Value));
  memo_.resize(index + 1, Value::make(Kind::kMark, 0));
  memo_[index] = v;
}

inline Value Machine::memo_get(std::uint64_t index) {
  const std::uint64_t local = index - memo_base_;  // wraps for an entry before a part
  if (local < memo_.size() && memo_[local].kind() < Kind::kMark) [[likely]] return memo_[local];
  return memo_get_other(index);
}

// In a part, entry `index` of the parts before it (index < memo_base_): a string the walk read,
// else a reference for the taker; noted either way, for the taker to check.
inline Value Machine::entry_before_part(std::uint64_t index) {
  foreign_seen_[index / 64] |= std::uint64_t{1} << (index % 64);
  if (index < known_before_.size() && known_before_[index].kind() != Kind::kMark) return known_before_[index];
  return Value::make(Kind::kForeign, index);
}

// Holes, entries of a part taken over (made objects on first use) and, in a part, entries of
// the parts before it.
Value Machine::memo_get_other(std::uint64_t index) {
  if (index < memo_base_) return entry_before_part(index);
  const std::uint64_t local = index - memo_base_;
  if (local < memo_.size() && memo_[local].kind() == Kind::kForeign) return memo_[local];
  if (local < memo_.size() && memo_[local].kind() == Kind::kDeferred) return resolve_deferred(local);
  fail(fmt::format("memo index {} out of range (memo holds {})", index, memo_.size()));
}

// Most of a snapshot is dicts written as EMPTY_DICT MEMOIZE MARK, keys and values, SETITEMS,
// where a value is a scalar, a memo reference or a list of memo references (a trace entry's
// frames). This loop reads such a body with its items in local arrays and the read position in
// a register. At the first opcode it does not handle it hands over to run() in exactly the state
// run() would have reached by then, so the result (and any error) is the same.
template <bool kInPart>
bool Machine::fill_dict_inline(Value dict) {
  if (end_ - pos_ < 2 || data_[pos_] != MEMOIZE || data_[pos_ + 1] != MARK || memo_.size() >= memo_checkpoint_ ||
      marks_.size() >= kMaxOpenMarks || strings_.memory_bytes() >= strings_checkpoint_)
    return false;
  push(dict);
  memo_.push_back(dict);  // MEMOIZE, as memo_put() would: the dict is on top
  marks_.push_back(stack_.size());
  // Each loop below reads at most kWindow bytes past its start (then hands over); every item
  // took at least one byte, and one more opcode may end past the window, so kWindow + 1 items fit.
  constexpr std::size_t kWindow = 1024;
  Value items[kWindow + 1];
  Value list_items[kWindow + 1];
  std::size_t n = 0;
  std::size_t p = pos_ + 2;
  const std::uint8_t* const data = data_;
  const std::size_t end = end_;
  // Where the next opcode may start: 16 bytes before the end cover every fixed-size operand.
  const std::size_t last_start = end >= 16 ? end - 16 : 0;
  const std::size_t dict_stop = std::min(last_start, p + kWindow);
  // A memo reference; a bad index fails as run() would, `after` being the opcode's end. Only
  // this loop's own MEMOIZEs change the memo meanwhile (memoize() below), so its start and size
  // stay in registers.
  const Value* memo = memo_.data();
  std::size_t memo_size = memo_.size();
  const std::uint64_t memo_checkpoint = memo_checkpoint_;  // past it, run() memoizes (and checks)
  // In a part, memo_[i] is entry memo_base_ + i; below it are the parts before (a compile-time
  // choice: the whole-file machine pays nothing for it).
  const std::uint64_t memo_base = kInPart ? memo_base_ : 0;
  auto lookup = [&](std::uint64_t index, std::size_t after) {
    const std::uint64_t local = index - memo_base;
    if (local >= memo_size || memo[local].kind() >= Kind::kMark) [[unlikely]] {
      if constexpr (kInPart) {
        if (index < memo_base) return entry_before_part(index);  // inline: keys, in every entry
      }
      pos_ = after;
      return memo_get_other(index);
    }
    return memo[local];
  };
  auto memoize = [&](Value v) {
    memo_.push_back(v);
    memo = memo_.data();
    memo_size = memo_.size();
  };
  auto read_u32 = [&](std::size_t at) {
    std::uint32_t v;
    std::memcpy(&v, data + at, 4);
    return v;
  };
  // The memo opcodes, alike in a dict and in a list: appends to values[count] or memoizes its
  // last value; false for any other opcode. `op` is data[p], loaded once by the caller, which
  // tests it again when this returns false.
  auto memo_opcode = [&](std::uint8_t op, Value* values, std::size_t& count) __attribute__((always_inline)) {
    if (op == BINGET) {
      values[count++] = lookup(data[p + 1], p + 2);
      p += 2;
    } else if (op == LONG_BINGET) {
      values[count++] = lookup(read_u32(p + 1), p + 5);
      p += 5;
    } else if (op == MEMOIZE && count > 0 && memo_size < memo_checkpoint) {
      memoize(values[count - 1]);
      p += 1;
    } else {
      return false;
    }
    return true;
  };
  // An opcode this loop does not take (or not in that form: a short string needs its length
  // more than 16 bytes) leaves it by `break`, and run() goes on from there.
  while (p <= dict_stop) {
    const std::uint8_t op = data[p];
    // Memo references first (most opcodes of an entry), then the others, most frequent first:
    // conditional branches, each predicted on its own, beat one indirect jump through a table.
    if (memo_opcode(op, items, n)) continue;
    if (op == LONG1) {  // as read_long(): n-byte little-endian two's complement, here n <= 8
      const std::size_t length = data[p + 1];
      if (length > 8) break;
      items[n++] = make_int(twos_complement(load_little_endian(data + p + 2, length, 14), length));  // 16 bytes from p
      p += 2 + length;
      continue;
    }
    if (op == BININT1) {
      items[n++] = Value::inline_int(data[p + 1]);
      p += 2;
      continue;
    }
    if (op == SHORT_BINUNICODE) {
      const std::size_t length = data[p + 1];
      if (end - p < length + 18) break;
      const std::string_view text(reinterpret_cast<const char*>(data + p + 2), length);
      items[n++] = Value::make(Kind::kString, strings_.intern_in_buffer(text));  // 16 bytes follow
      p += 2 + length;
      continue;
    }
    if (op == EMPTY_LIST) {
      if (data[p + 1] != MEMOIZE || memo_size >= memo_checkpoint) break;
      pos_ = p + 1;
      const Value list = new_object(ObjectKind::kList);
      memoize(list);
      p += 2;
      if (data[p] != MARK) {  // an empty frames list (about half the trace entries)
        items[n++] = list;
        continue;
      }
      p += 1;
      std::size_t m = 0;
      bool appended = false;
      const std::size_t list_stop = std::min(last_start, p + kWindow);
      while (p <= list_stop) {
        if (memo_opcode(data[p], list_items, m)) continue;
        if (data[p] == APPENDS) {
          pos_ = p + 1;
          add_list_items(list, std::span(list_items, m));
          p += 1;
          appended = true;
        }
        break;
      }
      if (!appended) {  // hand over inside the list: dict, MARK, items, list, MARK, its items
        pos_ = p;
        for (std::size_t i = 0; i < n; ++i) push(items[i]);
        push(list);
        marks_.push_back(stack_.size());
        for (std::size_t i = 0; i < m; ++i) push(list_items[i]);
        return true;
      }
      items[n++] = list;
      continue;
    }
    if (op == SETITEMS) {
      if (n % 2) break;
      pos_ = p + 1;
      complete_fresh_dict(dict, std::span(items, n));
      marks_.pop_back();
      return true;
    }
    if (op == BININT2) {
      items[n++] = Value::inline_int(data[p + 1] | (data[p + 2] << 8));
      p += 3;
      continue;
    }
    if (op == BININT) {
      items[n++] = Value::inline_int(static_cast<std::int32_t>(read_u32(p + 1)));
      p += 5;
      continue;
    }
    if (op == NONE) {
      items[n++] = Value::make(Kind::kNone, 0);
      p += 1;
      continue;
    }
    if (op == NEWTRUE || op == NEWFALSE) {
      items[n++] = Value::make(Kind::kBool, op == NEWTRUE);
      p += 1;
      continue;
    }
    break;
  }
  // Hand over: the dict and its MARK are already where run() keeps them; add the items.
  pos_ = p;
  for (std::size_t i = 0; i < n; ++i) push(items[i]);
  return true;
}

Value Machine::run() {
  Value top;
  if (!run_until_pause(top)) fail("truncated pickle: input ends before STOP");
  return top;
}

bool Machine::run_until_pause(Value& top) {
  if (!started_) {
    started_ = true;
    // Protocols 2 to 5 always begin with PROTO: anything else is some other file.
    refill(2);
    if (end_ > pos_ && data_[pos_] != PROTO)
      throw InputError(fmt::format("{}: not a pickle (starts with 0x{:02x}; snapshots start with 0x80)",
                                   name_, data_[pos_]));
  }
  for (;;) {
    if (end_ - pos_ < 16) [[unlikely]] {  // near a chunk's end: 16 bytes cover every fixed-size operand
      refill(16, true);
      if (pos_ >= end_) {
        if (source_.paused()) return false;
        fail("truncated pickle: input ends before STOP");
      }
    }
    const std::uint8_t op = data_[pos_++];
    if (op == STOP) [[unlikely]] {
      if (!marks_.empty() || stack_.size() != 1) fail("corrupt pickle: STOP with an unbalanced stack");
      top = stack_.back();
      return true;
    }
    step(op);
  }
}

void Machine::resume_at(std::uint64_t offset) {
  data_ = nullptr;
  pos_ = end_ = 0;
  base_offset_ = chunk_offset_ = offset;
  chunk_ = {};
  stitch_.clear();
  in_stitch_ = false;
  from_chunk_ = resume_ = 0;
  eof_ = false;
}

[[gnu::always_inline]] inline void Machine::step(std::uint8_t op) {
    switch (op) {
      case PROTO: {
        need(1, "PROTO");
        const unsigned version = data_[pos_++];
        if (version < 2 || version > 5)
          fail(fmt::format("unsupported pickle protocol {} (snapshots use 2 to 5)", version));
        break;
      }
      case FRAME: need(8, "FRAME"); pos_ += 8; break;
      case STOP: fail("corrupt pickle: STOP inside a value of a part");  // run_until_pause takes STOP
      case MARK:
        if (marks_.size() >= kMaxOpenMarks) [[unlikely]]
          fail("more than 2^20 open MARKs (hostile or corrupt pickle)");
        marks_.push_back(stack_.size());
        break;
      case POP: pop(); break;
      case POP_MARK: {
        const std::size_t m = pop_mark();
        stack_.resize(m);
        break;
      }
      case DUP: push(top()); break;

      case NONE: push(Value::make(Kind::kNone, 0)); break;
      case NEWTRUE: push(Value::make(Kind::kBool, 1)); break;
      case NEWFALSE: push(Value::make(Kind::kBool, 0)); break;
      case BININT1: need(1, "BININT1"); push(Value::inline_int(data_[pos_++])); break;
      case BININT2: need(2, "BININT2"); push(Value::inline_int(static_cast<std::int64_t>(read_le(2)))); break;
      case BININT: {
        need(4, "BININT");
        push(Value::inline_int(static_cast<std::int32_t>(static_cast<std::uint32_t>(read_le(4)))));
        break;
      }
      case LONG1: {
        need(1, "LONG1");
        const std::size_t n = data_[pos_++];
        push(read_long(n));
        break;
      }
      case LONG4: {
        need(4, "LONG4");
        const auto n = static_cast<std::int32_t>(static_cast<std::uint32_t>(read_le(4)));
        if (n < 0) fail("corrupt pickle: negative LONG4 length");
        push(read_long(static_cast<std::size_t>(n)));
        break;
      }
      case BINFLOAT: {
        need(8, "BINFLOAT");
        const std::uint64_t raw = __builtin_bswap64(read_le(8));  // big-endian IEEE 754
        if (wide_ints_.size() + floats_.size() >= scalars_checkpoint_) [[unlikely]]
          check_memory();
        floats_.push_back(std::bit_cast<double>(raw));
        push(Value::make(Kind::kFloat, floats_.size() - 1));
        break;
      }

      case SHORT_BINUNICODE:
      case SHORT_BINBYTES:
      case SHORT_BINSTRING: {
        need(1, "a string length");
        const std::size_t n = data_[pos_++];
        push(read_string(n));
        break;
      }
      case BINUNICODE:
      case BINBYTES:
      case BINSTRING: {
        need(4, "a string length");
        push(read_string(static_cast<std::size_t>(read_le(4))));
        break;
      }
      case BINUNICODE8:
      case BINBYTES8:
      case BYTEARRAY8: {
        need(8, "a string length");
        push(read_string(static_cast<std::size_t>(read_le(8))));
        break;
      }

      case EMPTY_DICT: {
        const Value dict = new_object(ObjectKind::kDict);
        if (!(in_part_ ? fill_dict_inline<true>(dict) : fill_dict_inline<false>(dict))) push(dict);
        break;
      }
      case EMPTY_LIST:
      case EMPTY_SET: push(new_object(ObjectKind::kList)); break;
      case EMPTY_TUPLE: push(make_tuple({})); break;
      case TUPLE1:
      case TUPLE2:
      case TUPLE3: {
        const std::size_t n = op - TUPLE1 + 1;
        if (stack_.size() < n || (!marks_.empty() && stack_.size() - marks_.back() < n))
          fail("corrupt pickle: stack underflow");
        const Value t = make_tuple(std::span(stack_).last(n));
        stack_.resize(stack_.size() - n);
        push(t);
        break;
      }
      case TUPLE:
      case FROZENSET:
      case LIST:
      case DICT: {
        const std::size_t m = pop_mark();
        const std::span<const Value> items = std::span(stack_).subspan(m);
        Value result;
        if (op == TUPLE) {
          result = make_tuple(items);
        } else if (op == DICT) {
          result = new_object(ObjectKind::kDict);
          if (!items.empty()) add_dict_items(result, items);
        } else {
          result = new_object(ObjectKind::kList);
          if (!items.empty()) add_list_items(result, items);
        }
        stack_.resize(m);
        push(result);
        break;
      }
      case SETITEM: {
        if (stack_.size() < 3 || (!marks_.empty() && stack_.size() - marks_.back() < 3))
          fail("corrupt pickle: stack underflow");
        add_dict_items(stack_[stack_.size() - 3], std::span(stack_).last(2));
        stack_.resize(stack_.size() - 2);
        break;
      }
      case SETITEMS:
      case APPENDS:
      case ADDITEMS: {
        const std::size_t m = pop_mark();
        if (m == 0 || (!marks_.empty() && marks_.back() >= m))
          fail("corrupt pickle: no container below MARK");
        const std::span<const Value> items = std::span(stack_).subspan(m);
        if (op == SETITEMS) add_dict_items(stack_[m - 1], items);
        else add_list_items(stack_[m - 1], items);
        stack_.resize(m);
        break;
      }
      case APPEND: {
        if (stack_.size() < 2 || (!marks_.empty() && stack_.size() - marks_.back() < 2))
          fail("corrupt pickle: stack underflow");
        add_list_items(stack_[stack_.size() - 2], std::span(stack_).last(1));
        stack_.pop_back();
        break;
      }

      case MEMOIZE: memo_put(memo_.size()); break;
      case BINPUT:
      case LONG_BINPUT: {
        if (in_part_) fail("a part takes no explicit memo index");  // its memo indices are relative
        need(op == BINPUT ? 1 : 4, op == BINPUT ? "BINPUT" : "LONG_BINPUT");
        memo_put(op == BINPUT ? data_[pos_++] : read_le(4));
        break;
      }
      case BINGET: need(1, "BINGET"); push(memo_get(data_[pos_++])); break;
      case LONG_BINGET: need(4, "LONG_BINGET"); push(memo_get(read_le(4))); break;

      case GLOBAL: refuse("GLOBAL", "would import code");
      case STACK_GLOBAL: refuse("STACK_GLOBAL", "would import code");
      case INST: refuse("INST", "would import and call code");
      case OBJ: refuse("OBJ", "would call code");
      case REDUCE: refuse("REDUCE", "would call code");
      case BUILD: refuse("BUILD", "would call code (__setstate__)");
      case NEWOBJ: refuse("NEWOBJ", "would call code");
      case NEWOBJ_EX: refuse("NEWOBJ_EX", "would call code");
      case EXT1: refuse("EXT1", "would import code");
      case EXT2: refuse("EXT2", "would import code");
      case EXT4: refuse("EXT4", "would import code");
      case PERSID: refuse("PERSID", "would call a persistent-load hook");
      case BINPERSID: refuse("BINPERSID", "would call a persistent-load hook");
      case NEXT_BUFFER: refuse("NEXT_BUFFER", "needs out-of-band buffers (not a snapshot)");
      case READONLY_BUFFER: refuse("READONLY_BUFFER", "needs out-of-band buffers (not a snapshot)");

      case INT: case LONG: case FLOAT: case STRING: case UNICODE: case GET: case PUT:
        fail(fmt::format("unsupported protocol-0 opcode '{}' (snapshots use protocol 2 to 5)",
                         static_cast<char>(op)));
      default:
        fail(fmt::format("corrupt pickle: unknown opcode 0x{:02x}", op));
    }
}


// --- Parts parsed apart (parallel_reader.h) ---

void Machine::start_part(std::uint64_t start, std::uint64_t memo_base, std::span<const Value> known_before) {
  started_ = in_part_ = true;
  base_offset_ = chunk_offset_ = first_offset_ = start;
  memo_base_ = memo_base;
  known_before_.assign(known_before.begin(), known_before.begin() + static_cast<std::ptrdiff_t>(
                                                 std::min<std::uint64_t>(known_before.size(), memo_base)));
  foreign_seen_.assign((memo_base + 63) / 64, 0);
}

PartEnd Machine::run_part(std::uint64_t nominal_stop, const std::function<std::uint64_t()>& stop,
                          std::vector<PartOp>& log) {
  std::uint64_t stop_at = nominal_stop;
  bool stop_known = false;
  for (;;) {
    if (end_ - pos_ < 16) {
      refill(16, true);
      if (pos_ >= end_) return PartEnd::kEndOfInput;
    }
    if (offset() >= stop_at) {
      if (stop_known) return PartEnd::kReachedStop;
      stop_at = std::max(stop(), nominal_stop);
      stop_known = true;
      continue;
    }
    switch (data_[pos_]) {
      case MARK:
        ++pos_;
        log.push_back({PartOp::kMark});
        break;
      case APPENDS:
        ++pos_;
        log.push_back({PartOp::kAppends});
        break;
      case FRAME:
        ++pos_;
        need(8, "FRAME");
        pos_ += 8;
        break;
      case EMPTY_DICT: {
        // A trace entry: EMPTY_DICT MEMOIZE MARK, its items, SETITEMS (16 bytes are readable).
        if (end_ - pos_ < 3 || data_[pos_ + 1] != MEMOIZE || data_[pos_ + 2] != MARK) return PartEnd::kOtherOpcode;
        ++pos_;
        if (!fill_dict_inline<true>(new_object(ObjectKind::kDict))) fail("the memo is full");
        while (stack_.size() != 1 || !marks_.empty()) {
          if (end_ - pos_ < 16) {
            refill(16, true);
            if (pos_ >= end_) fail("truncated pickle: input ends inside a value");
          }
          step(data_[pos_++]);
        }
        const Value v = stack_.back();
        stack_.pop_back();
        if (objects_[v.payload()].kind != ObjectKind::kTyped) fail("a part's value was not claimed");
        const TypedRef ref = typed(v);
        PartOp* last = log.empty() ? nullptr : &log.back();
        if (last && last->kind == PartOp::kPush && last->type == ref.type && last->first + last->count == ref.index)
          ++last->count;
        else
          log.push_back({PartOp::kPush, ref.type, ref.index, 1});
        break;
      }
      default:
        return PartEnd::kOtherOpcode;
    }
  }
}

}  // namespace fragscope::snapshot::pickle

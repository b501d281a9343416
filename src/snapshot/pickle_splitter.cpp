#include "snapshot/pickle_splitter.h"

#include <array>
#include <cstring>
#include <exception>
#include <optional>
#include <span>

#include "util/little_endian.h"

namespace fragscope::snapshot {

SplitPlan::SplitPlan(std::vector<std::uint64_t> bounds) : bounds_(std::move(bounds)), walks_(bounds_.size()) {}

void SplitPlan::set_region(std::size_t j, RegionWalk walk) {
  std::lock_guard lock(mutex_);
  walks_[j] = walk;
  changed_.notify_all();
}

void SplitPlan::set_known_strings(std::vector<KnownString> strings, std::optional<std::uint64_t> action_key) {
  std::lock_guard lock(mutex_);
  if (known_set_) return;
  known_ = std::move(strings);
  action_key_ = action_key;
  known_set_ = true;
  changed_.notify_all();
}

const std::vector<KnownString>& SplitPlan::known_strings() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return known_set_; });
  return known_;
}

std::optional<std::uint64_t> SplitPlan::action_key() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return known_set_; });
  return action_key_;
}

std::optional<PartStart> SplitPlan::start(std::size_t j) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] {
    for (std::size_t i = 0; i <= j; ++i)
      if (!walks_[i]) return false;
    return true;
  });
  std::uint64_t memo = 0;
  for (std::size_t i = 0; i < j; ++i) {
    if (!walks_[i]->walked) return std::nullopt;  // the memo count before part j is unknown
    memo += walks_[i]->memoizes;
  }
  const RegionWalk& walk = *walks_[j];
  if (!walk.entry) return std::nullopt;
  return PartStart{*walk.entry, memo + walk.memoizes_before_entry};
}

std::optional<std::size_t> SplitPlan::first_start_in(std::uint64_t from, std::uint64_t end) {
  for (std::size_t j = 1; j < bounds_.size(); ++j) {
    if (region_end(j) <= from) continue;
    if (bounds_[j] >= end) break;
    if (const auto s = start(j); s && s->offset >= from && s->offset < end) return j;
  }
  return std::nullopt;
}

namespace {

// Opcodes (CPython Lib/pickle.py) the walk tells apart.
enum : std::uint8_t {
  MARK = '(', STOP = '.', BININT = 'J', BININT1 = 'K', BININT2 = 'M', BINGET = 'h',
  LONG_BINGET = 'j', BINFLOAT = 'G', BINUNICODE = 'X', BINBYTES = 'B', BINSTRING = 'T',
  SHORT_BINBYTES = 'C', SHORT_BINSTRING = 'U', EMPTY_DICT = '}', PROTO = 0x80, LONG1 = 0x8a,
  LONG4 = 0x8b, SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d, BINBYTES8 = 0x8e, MEMOIZE = 0x94,
  FRAME = 0x95, BYTEARRAY8 = 0x96,
};

/// How the walk steps over an opcode: its operand's size, or where its length is.
enum Operand : std::uint8_t { kNone, kFixed1, kFixed2, kFixed4, kFixed8, kLength1, kLength4, kLength8, kStop };

constexpr std::array<std::uint8_t, 256> kOperands = [] {
  std::array<std::uint8_t, 256> t{};
  t.fill(kStop);  // an opcode a snapshot does not use (or that would run code): not walked
  for (const char op : {'(', '0', '1', '2', 'N', '}', ']', ')', 'a', 'e', 'd', 'l', 't', 's', 'u'})
    t[static_cast<std::uint8_t>(op)] = kNone;
  for (const int op : {0x85, 0x86, 0x87, 0x88, 0x89, 0x8f, 0x90, 0x91, 0x94}) t[op] = kNone;
  t[PROTO] = t[BININT1] = t[BINGET] = kFixed1;
  t[BININT2] = kFixed2;
  t[BININT] = t[LONG_BINGET] = kFixed4;
  t[BINFLOAT] = t[FRAME] = kFixed8;
  t[SHORT_BINUNICODE] = t[SHORT_BINBYTES] = t[SHORT_BINSTRING] = t[LONG1] = kLength1;
  t[BINUNICODE] = t[BINBYTES] = t[BINSTRING] = t[LONG4] = kLength4;
  t[BINUNICODE8] = t[BINBYTES8] = t[BYTEARRAY8] = kLength8;
  return t;
}();

/// The stream in the source's chunks; the few bytes of an opcode that spans two are copied.
class Cursor {
 public:
  static constexpr std::size_t kLookahead = 32;  // every opcode and the entry pattern fit

  /// @param start the stream offset of the source's first byte.
  Cursor(ByteSource& source, std::uint64_t start) : source_(source), base_(start) {}

  std::uint64_t offset() const { return base_ + pos_; }
  /// Up to kLookahead bytes at here(); how many are readable (fewer only at the end).
  std::size_t readable() {
    if (in_stitch_ && pos_ >= stitch_tail_) {  // past the copied tail: read the chunk in place
      in_stitch_ = false;
      base_ += stitch_tail_;
      pos_ -= stitch_tail_;
      data_ = chunk_.data();
      end_ = chunk_.size();
    }
    if (end_ - pos_ < kLookahead && !eof_) refill();
    return std::min(end_ - pos_, kLookahead);
  }
  const std::uint8_t* here() const { return data_ + pos_; }
  void advance(std::size_t n) { pos_ += n; }
  /// Bytes readable at here() beyond the kLookahead every opcode may need (0 near an edge).
  std::size_t fast_span() const {
    const std::size_t end = in_stitch_ ? stitch_tail_ : end_;
    return end - pos_ > kLookahead ? end - kLookahead - pos_ : 0;
  }
  /// Steps over `n` bytes, which may span chunks; false when the stream ends first.
  bool skip(std::uint64_t n) {
    while (n > end_ - pos_) {
      n -= end_ - pos_;
      pos_ = end_;
      if (readable() == 0) return false;
    }
    pos_ += n;
    return true;
  }

 private:
  void refill() {
    const std::size_t tail = end_ - pos_;
    if (tail > 0) std::memmove(stitch_, data_ + pos_, tail);
    base_ += pos_;
    chunk_ = source_.next_chunk();
    const std::size_t copied = std::min(chunk_.size(), kLookahead);
    if (copied > 0) std::memcpy(stitch_ + tail, chunk_.data(), copied);
    eof_ = chunk_.empty();
    data_ = stitch_;
    pos_ = 0;
    end_ = tail + copied;
    in_stitch_ = copied < chunk_.size();  // the rest of the chunk is then read in place
    stitch_tail_ = tail;
  }

  ByteSource& source_;
  std::span<const std::uint8_t> chunk_;
  const std::uint8_t* data_ = nullptr;
  std::size_t pos_ = 0, end_ = 0;
  std::uint64_t base_ = 0;  // stream offset of data_[0]
  std::uint8_t stitch_[2 * kLookahead];
  bool in_stitch_ = false;
  std::size_t stitch_tail_ = 0;  // stitch_[0, stitch_tail_) came from the chunk before chunk_
  bool eof_ = false;
};

constexpr std::size_t kMaxKnownStrings = std::size_t{1} << 20;

/// A region's walk: its state, and one opcode's step.
class Walk {
 public:
  Walk(bool record, std::optional<std::uint64_t> action_key) : action_key_(action_key), recording_(record) {}

  /// Steps over the opcode at `p` (offset `at`, `n` bytes readable, n >= 9 or the end):
  /// returns its size (the operand of a string may reach past the n bytes), 0 to stop the walk.
  [[gnu::always_inline]] std::uint64_t step(const std::uint8_t* p, std::size_t n, std::uint64_t at) {
    const std::uint8_t op = p[0];
    const bool was_string = string_on_top_;
    string_on_top_ = false;
    switch (kOperands[op]) {
      case kNone:
        if (op == MEMOIZE) {
          if (was_string && recording_) remember(last_string_);
          ++memo_;
        } else if (op == EMPTY_DICT && action_key_ && n >= 8 && p[1] == MEMOIZE && p[2] == MARK) {
          entry_at(p, at);
        }
        return 1;
      case kFixed1:
        if (n < 2 || (op == PROTO && p[1] < 4)) return 0;  // protocols 2 and 3 memoize by index
        return 2;
      case kFixed2: return n < 3 ? 0 : 3;
      case kFixed4: return n < 5 ? 0 : 5;
      case kFixed8: return n < 9 ? 0 : 9;
      case kLength1:
        if (n < 2) return 0;
        if (op == SHORT_BINUNICODE && recording_ && n >= 2u + p[1]) {
          last_string_.assign(reinterpret_cast<const char*>(p + 2), p[1]);
          string_on_top_ = true;
        }
        return 2u + p[1];
      case kLength4: {
        if (n < 5) return 0;
        const std::uint64_t length = load_little_endian(p + 1, 4, 4);
        if (op == LONG4 && (length >> 31)) return 0;  // negative
        return 5 + length;
      }
      case kLength8: return n < 9 ? 0 : 9 + load_little_endian(p + 1, 8, 8);
      default:
        stop_ = op == STOP;
        return 0;  // STOP, BINPUT, or an opcode the walk does not take
    }
  }

  bool at_stop() const { return stop_; }
  RegionWalk result(bool walked) const { return {walked, memo_, entry_, before_entry_}; }
  /// Region 0: what the parts need from it, once (at the second trace entry, or the end).
  void publish_known(SplitPlan& plan) {
    if (!published_) plan.set_known_strings(std::move(known_), action_key_);
    published_ = true;
    recording_ = false;
  }
  bool wants_publish() const { return recording_ && ready_; }

 private:
  // A trace entry: EMPTY_DICT MEMOIZE MARK, then BINGET or LONG_BINGET of 'action'.
  void entry_at(const std::uint8_t* p, std::uint64_t at) {
    if (!((p[3] == BINGET && p[4] == *action_key_) ||
          (p[3] == LONG_BINGET && load_little_endian(p + 4, 4, 4) == *action_key_)))
      return;
    ready_ = true;  // region 0: the second trace entry, the first one's keys are known
    if (!entry_) {
      entry_ = at;
      before_entry_ = memo_;
    }
  }
  void remember(const std::string& text) {
    if (text == "action") action_key_ = memo_;
    known_.push_back({memo_, text});
    if (known_.size() >= kMaxKnownStrings) ready_ = true;  // no trace entries early on: stop keeping
  }

  std::uint64_t memo_ = 0;
  std::optional<std::uint64_t> action_key_;  // memo index of the str 'action' (region 0: once memoized)
  std::optional<std::uint64_t> entry_;
  std::uint64_t before_entry_ = 0;
  bool recording_;  // region 0: memoized strs are kept until the second trace entry
  bool ready_ = false;
  bool published_ = false;
  bool stop_ = false;
  std::vector<KnownString> known_;
  std::string last_string_;
  bool string_on_top_ = false;  // the opcode before was SHORT_BINUNICODE (its text in last_string_)
};

RegionWalk walk_in(ByteSource& source, SplitPlan& plan, std::size_t j, Walk& walk) {
  const std::uint64_t begin = plan.region_begin(j), end = plan.region_end(j);
  Cursor in(source, begin);
  for (;;) {
    if (walk.wants_publish()) walk.publish_known(plan);
    const std::size_t n = in.readable();
    if (n == 0 || in.offset() >= end) break;
    // Opcodes with kLookahead bytes after them in this window (and before the region's end),
    // then one near its edge.
    const std::uint8_t* p = in.here();
    const std::uint64_t base = in.offset();
    std::size_t pos = 0;
    const std::size_t fast = std::min<std::uint64_t>(in.fast_span(), end - base);
    while (pos < fast) {
      const std::uint64_t size = walk.step(p + pos, Cursor::kLookahead, base + pos);
      if (size == 0) {
        in.advance(pos);
        return walk.result(walk.at_stop() && end == ~std::uint64_t{0});
      }
      if (size > fast - pos) {  // a long operand, or the region's end: the slow way below
        break;
      }
      pos += size;
    }
    in.advance(pos);
    if (pos > 0 && in.offset() < end) continue;
    if (in.offset() >= end) break;
    const std::uint64_t size = walk.step(in.here(), in.readable(), in.offset());
    if (size == 0) return walk.result(walk.at_stop() && end == ~std::uint64_t{0});
    if (!in.skip(size)) break;
  }
  return walk.result(in.offset() == end);
}

}  // namespace

void walk_region(ByteSource& source, SplitPlan& plan, std::size_t j) {
  RegionWalk result;
  Walk walk(j == 0, j == 0 ? std::nullopt : plan.action_key());
  try {
    result = walk_in(source, plan, j, walk);
  } catch (const std::exception&) {
    // A read or decompression error: the whole-file parse reports it.
  }
  if (j == 0) walk.publish_known(plan);  // unless the walk did already
  plan.set_region(j, result);
}

std::vector<std::uint64_t> frame_bounds(
    const std::function<std::size_t(std::uint64_t, std::span<std::uint8_t>)>& read_at, std::uint64_t size,
    unsigned parts) {
  std::vector<std::uint64_t> bounds{0};
  std::uint8_t head[9];
  if (read_at(0, std::span(head, 3)) != 3 || head[0] != PROTO || head[1] < 4 || head[2] != FRAME) return bounds;
  std::uint64_t at = 2;
  for (unsigned k = 1; k < parts; ++k) {
    const std::uint64_t target = size / parts * k;
    while (at < target) {  // from frame to frame
      if (read_at(at, std::span(head, 9)) != 9 || head[0] != FRAME) return bounds;
      const std::uint64_t length = load_little_endian(head + 1, 8, 8);
      if (at + 9 > size || length > size - at - 9) return bounds;  // past the end (or a hostile length)
      at += 9 + length;
    }
    if (at >= size) break;
    if (read_at(at, std::span(head, 1)) != 1 || head[0] != FRAME) return bounds;
    if (at > bounds.back()) bounds.push_back(at);
  }
  return bounds;
}

}  // namespace fragscope::snapshot

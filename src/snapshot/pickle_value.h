#pragma once
/// @file pickle_value.h
/// @brief The 8-byte values of the safe pickle machine.
///
/// A value is a 4-bit kind and a 60-bit payload. Small integers and string ids are inline;
/// integers beyond 60 bits and floats are boxed in the machine's side tables; containers are
/// references to the machine's object table, so memo entries and shared objects (PyTorch shares
/// identical frame lists) are references, never copies.

#include <cstdint>

namespace fragscope::snapshot::pickle {

enum class Kind : std::uint8_t {
  kNone,
  kBool,
  kInt,       ///< payload: signed 60-bit integer
  kWideInt,   ///< payload: index into the machine's wide integers (fits int64)
  /// An integer in [2^63, 2^64): a C++ size_t PyTorch wrote as it is (2^64 − 1 for a frame's
  /// unknown line). payload: index into the machine's wide integers, which hold its bits.
  kUInt64,
  kHugeInt,   ///< an integer beyond [-2^63, 2^64) (kept only as "too large")
  kFloat,     ///< payload: index into the machine's floats
  kString,    ///< payload: StringId (str and bytes alike)
  kObject,    ///< payload: index into the machine's object table (list, dict, tuple, typed)
  kMark,      ///< only on the stack: MARK; in the memo: an index never stored
  // Only in the parallel reader (parallel_reader.h), never seen by an observer of a whole file:
  kDeferred,  ///< in the memo: an entry of a part taken over, made a value when first used
  kForeign,   ///< in a part: a memo entry of an earlier part, unknown here; payload: memo index
};

class Value {
 public:
  static constexpr std::uint64_t kPayloadBits = 60;
  static constexpr std::uint64_t kPayloadMask = (std::uint64_t{1} << kPayloadBits) - 1;
  static constexpr std::int64_t kInlineMin = -(std::int64_t{1} << (kPayloadBits - 1));
  static constexpr std::int64_t kInlineMax = (std::int64_t{1} << (kPayloadBits - 1)) - 1;

  /// Trivial, so arrays of values cost nothing to declare; `Value{}` is None.
  Value() = default;
  static constexpr Value make(Kind kind, std::uint64_t payload) {
    return Value((static_cast<std::uint64_t>(kind) << kPayloadBits) | (payload & kPayloadMask));
  }
  static constexpr Value inline_int(std::int64_t v) {
    return make(Kind::kInt, static_cast<std::uint64_t>(v));
  }

  constexpr Kind kind() const { return static_cast<Kind>(bits_ >> kPayloadBits); }
  constexpr std::uint64_t payload() const { return bits_ & kPayloadMask; }
  /// @brief The inline integer. REQUIRES: kind() == Kind::kInt.
  constexpr std::int64_t inline_value() const {
    // Sign-extend the 60-bit payload.
    return static_cast<std::int64_t>(bits_ << (64 - kPayloadBits)) >> (64 - kPayloadBits);
  }
  constexpr bool operator==(const Value&) const = default;

 private:
  constexpr explicit Value(std::uint64_t bits) : bits_(bits) {}
  std::uint64_t bits_;  // Kind::kNone when value-initialised (all zero)
};

static_assert(sizeof(Value) == 8);

}  // namespace fragscope::snapshot::pickle

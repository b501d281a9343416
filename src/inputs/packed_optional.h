#pragma once
/// @file packed_optional.h
/// @brief An optional number in the bytes of the number, read as std::optional is.
///
/// Why: a steps.jsonl record has a dozen optional numbers, most absent; std::optional doubles each
/// (a flag padded to the number's alignment), and a file of millions of records pays it on every one.
/// Absence is a value no reader stores instead: NaN for floating point (JSON has none), the lowest
/// value for integers (the telemetry reader refuses it as out of range). Storing that value makes
/// the optional absent.
/// Thread-safety: a plain value.

#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

namespace fragscope::inputs {

template <typename T>
class PackedOptional {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>, "a number that has a value to spare");

 public:
  /// @brief The value that means absent.
  static constexpr T kAbsent =
      std::is_floating_point_v<T> ? std::numeric_limits<T>::quiet_NaN() : std::numeric_limits<T>::lowest();

  constexpr PackedOptional() = default;
  constexpr PackedOptional(std::nullopt_t) {}           // NOLINT: as std::optional, implicit
  constexpr PackedOptional(T value) : value_(value) {}  // NOLINT: as std::optional, implicit

  constexpr bool has_value() const {
    if constexpr (std::is_floating_point_v<T>)
      return !std::isnan(value_);
    else
      return value_ != kAbsent;
  }
  constexpr explicit operator bool() const { return has_value(); }
  /// @brief The value; as for std::optional, only when has_value().
  constexpr const T& operator*() const { return value_; }
  /// @throws std::bad_optional_access when absent.
  constexpr T value() const { return has_value() ? value_ : throw std::bad_optional_access(); }
  constexpr T value_or(T fallback) const { return has_value() ? value_ : fallback; }
  constexpr void reset() { value_ = kAbsent; }
  constexpr operator std::optional<T>() const {  // NOLINT: where the std::optional was
    return has_value() ? std::optional<T>(value_) : std::nullopt;
  }

  /// As std::optional: equal to a value when present and equal; two absent ones are equal.
  friend constexpr bool operator==(const PackedOptional& a, T b) { return a.has_value() && a.value_ == b; }
  friend constexpr bool operator==(const PackedOptional& a, std::nullopt_t) { return !a.has_value(); }
  friend constexpr bool operator==(const PackedOptional& a, const PackedOptional& b) {
    return a.has_value() == b.has_value() && (!a.has_value() || a.value_ == b.value_);
  }

 private:
  T value_ = kAbsent;
};

}  // namespace fragscope::inputs

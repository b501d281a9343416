#pragma once
/// @file bytes.h
/// @brief Byte counts for people: PyTorch-style formatting and parsing of sizes.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fragscope {

inline constexpr std::uint64_t kKiB = 1024;
inline constexpr std::uint64_t kMiB = 1024 * kKiB;
inline constexpr std::uint64_t kGiB = 1024 * kMiB;

/// @brief Formats like PyTorch's `format_size` in OOM messages: "1.54 GiB", "1017.12 MiB",
/// "512 bytes". Two decimals, binary units, the largest unit below 1024 of the next.
std::string format_bytes(std::uint64_t bytes);

/// @brief Same as format_bytes but for signed differences ("-1.20 GiB").
std::string format_signed_bytes(std::int64_t bytes);

/// @brief Parses "1.54 GiB", "1017.12 MiB", "12 bytes", "40GB", "42805960704".
/// Decimal units (KB/MB/GB/TB) are powers of 1000, binary units (KiB/MiB/GiB/TiB) of 1024.
/// @return nullopt when the text is not a size.
std::optional<std::uint64_t> parse_bytes(std::string_view text);

}  // namespace fragscope

#pragma once
/// @file trace_size.h
/// @brief Comparing sizes across a trace: alloc entries carry block sizes, the `oom` entry its
/// request rounded to 512 bytes, so two sizes within 512 bytes are the same request.

#include <cstdint>

namespace fragscope::diagnose {

inline constexpr std::uint64_t kTraceSizeSlack = 512;

/// @brief True when `a` and `b` are the same request as the trace records it.
constexpr bool same_trace_size(std::uint64_t a, std::uint64_t b) { return (a > b ? a - b : b - a) < kTraceSizeSlack; }

}  // namespace fragscope::diagnose

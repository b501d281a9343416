#pragma once
/// @file flag_checks.h
/// @brief What a flag's value must look like, with one-line errors that say what to give
/// instead (CLI11 prints them as "--flag: message"): whole numbers in a range, fractions,
/// sizes with a unit, and the allocator config "default".

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace fragscope::cli {

inline constexpr std::uint64_t kMaxThreads = 4096;
/// How sizes are written, for --help and the man page (a footer paragraph, "Title: text").
inline constexpr const char* kSizesHelp =
    "Sizes: GiB, MiB, KiB, TiB and the short G, M, K, T are binary (40GiB = 40G = 40 x 2^30 bytes, as\n"
    "PyTorch and nvidia-smi count); GB, MB, KB, TB are decimal (40GB = 40 x 10^9 bytes = 37.25 GiB); B or bytes\n"
    "for a count of bytes. A bare number is refused. The size in a GPU's name is part of the product's name,\n"
    "not a size: give such a card with --gpu NAME (A100-40GB has 40 GiB, the H200 \"141GB\" 140.40 GiB).";
inline constexpr std::uint64_t kMaxDeviceOrdinal = 1023;

/// @brief A whole number from `min` to `max` ("0" for --threads: "give a whole number from 1
/// to 4096").
CLI::Validator whole_number(std::uint64_t min, std::uint64_t max);

/// @brief A decimal number from `min` to `max`, in `unit` ("seconds", "of the step time").
CLI::Validator number_between(double min, double max, std::string_view unit);

/// @brief A size: a number with a unit, binary (KiB MiB GiB TiB, and the short K M G T) or
/// decimal (KB MB GB TB), or B / bytes for a plain count; not zero. A bare number is refused:
/// "40" could mean bytes or GiB, and the error suggests the spellings.
CLI::Validator size_value();

/// @brief The bytes of a size flag checked by size_value(); nullopt for "" (not given).
/// @throws InputError naming `flag` when the text is not a size.
std::optional<std::uint64_t> parse_size_flag(const std::string& text, std::string_view flag);

/// @brief --alloc-conf's value: "default" (or "defaults", any case) is PyTorch's defaults, the
/// empty config ""; anything else is kept for the allocator's own parser.
std::string alloc_conf_value(std::string text);

}  // namespace fragscope::cli

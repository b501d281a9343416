#include "alloc/alloc_config.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <vector>

#include <fmt/format.h>

#include "util/error.h"

namespace fragscope::alloc {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
// PyTorch refuses max_split_size_mb / max_non_split_rounding_mb below kLargeBuffer (20 MiB).
constexpr std::uint64_t kMinSplitMb = 20;

[[noreturn]] void fail(std::string_view key, std::string_view problem) {
  throw InputError(fmt::format("PYTORCH_CUDA_ALLOC_CONF: {} (key '{}')", problem, key));
}

/// Splits like PyTorch's ConfigTokenizer: ',' ':' '[' ']' are tokens, whitespace is dropped.
std::vector<std::string> tokenize(std::string_view text) {
  std::vector<std::string> tokens;
  std::string word;
  for (char ch : text) {
    if (ch == ',' || ch == ':' || ch == '[' || ch == ']') {
      if (!word.empty()) tokens.push_back(std::move(word));
      word.clear();
      tokens.emplace_back(1, ch);
    } else if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') {
      word += ch;
    }
  }
  if (!word.empty()) tokens.push_back(std::move(word));
  return tokens;
}

class Parser {
 public:
  explicit Parser(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}

  bool done() const { return pos_ >= tokens_.size(); }
  const std::string& peek() const { return tokens_[pos_]; }
  std::string next(std::string_view key, std::string_view what) {
    if (done()) fail(key, fmt::format("expected {} but the string ended", what));
    return tokens_[pos_++];
  }
  void expect(std::string_view key, std::string_view token) {
    std::string got = next(key, fmt::format("'{}'", token));
    if (got != token) fail(key, fmt::format("expected '{}' but got '{}'", token, got));
  }

  std::uint64_t unsigned_value(std::string_view key) {
    std::string text = next(key, "a number");
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) {
      fail(key, fmt::format("'{}' is not a non-negative integer", text));
    }
    return value;
  }
  double double_value(std::string_view key) {
    std::string text = next(key, "a number");
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) {
      fail(key, fmt::format("'{}' is not a number", text));
    }
    return value;
  }
  bool bool_value(std::string_view key) {
    std::string text = next(key, "True or False");
    if (text == "True") return true;
    if (text == "False") return false;
    fail(key, fmt::format("expected a single True/False argument but got '{}'", text));
  }

 private:
  std::vector<std::string> tokens_;
  std::size_t pos_ = 0;
};

bool is_power_of_two(std::uint64_t v) { return v != 0 && std::has_single_bit(v); }

std::uint64_t split_size_mb(Parser& p, std::string_view key) {
  std::uint64_t mb = p.unsigned_value(key);
  if (mb < kMinSplitMb) fail(key, fmt::format("{} too small, must be >= {}", mb, kMinSplitMb));
  return std::min(mb, kNoSplitLimit / kMiB) * kMiB;
}

void parse_roundup(Parser& p, std::string_view key, AllocConfig& config) {
  auto& divisions = config.roundup_power2_divisions;
  divisions.fill(0);
  if (!p.done() && p.peek() != "[") {
    std::uint64_t all = p.unsigned_value(key);
    if (!is_power_of_two(all)) fail(key, fmt::format("divisions {} must be a power of 2", all));
    divisions.fill(static_cast<std::uint32_t>(all));
    return;
  }
  p.expect(key, "[");
  bool first = true;
  std::size_t last_index = 0;
  while (true) {
    std::string interval = p.next(key, "an interval or ']'");
    if (interval == "]") break;
    p.expect(key, ":");
    std::uint64_t value = p.unsigned_value(key);
    if (value != 0 && !is_power_of_two(value)) {
      fail(key, fmt::format("divisions {} must be a power of 2 or 0", value));
    }
    if (interval == ">") {
      std::fill(divisions.begin() + static_cast<std::ptrdiff_t>(last_index), divisions.end(),
                static_cast<std::uint32_t>(value));
    } else {
      std::uint64_t mb = 0;
      auto [end, ec] = std::from_chars(interval.data(), interval.data() + interval.size(), mb);
      if (ec != std::errc() || end != interval.data() + interval.size() || !is_power_of_two(mb)) {
        fail(key, fmt::format("interval '{}' must be a power of 2 (MiB) or '>'", interval));
      }
      std::size_t index = std::min<std::size_t>(std::bit_width(mb) - 1, kRoundupIntervals - 1);
      if (first) {
        // As PyTorch: the first entry also covers every interval below it.
        std::fill(divisions.begin(), divisions.begin() + static_cast<std::ptrdiff_t>(index),
                  static_cast<std::uint32_t>(value));
        first = false;
      }
      divisions[index] = static_cast<std::uint32_t>(value);
      last_index = index;
    }
    if (!p.done() && p.peek() == "]") continue;
    p.expect(key, ",");
  }
}

}  // namespace

AllocConfig parse_alloc_conf(std::string_view text) {
  AllocConfig config;
  Parser p(tokenize(text));
  while (!p.done()) {
    std::string key = p.next("", "a key");
    if (key == "," || key == ":" || key == "[" || key == "]") {
      fail(key, "expected a key");
    }
    p.expect(key, ":");
    if (key == "max_split_size_mb") {
      config.max_split_size = split_size_mb(p, key);
    } else if (key == "max_non_split_rounding_mb") {
      config.max_non_split_rounding = split_size_mb(p, key);
    } else if (key == "large_segment_size_mb") {
      std::uint64_t mb = p.unsigned_value(key);
      if (mb <= 10) fail(key, fmt::format("{} too small, must be > 10", mb));
      config.large_segment_size = mb * kMiB;
    } else if (key == "garbage_collection_threshold") {
      double v = p.double_value(key);
      if (!(v > 0.0 && v < 1.0)) fail(key, fmt::format("{} is invalid, set it in (0.0, 1.0)", v));
      config.garbage_collection_threshold = v;
    } else if (key == "roundup_power2_divisions") {
      parse_roundup(p, key, config);
    } else if (key == "expandable_segments") {
      config.expandable_segments = p.bool_value(key);
    } else if (key == "per_process_memory_fraction") {
      double v = p.double_value(key);
      if (!(v >= 0.0 && v <= 1.0)) fail(key, fmt::format("{} is invalid, set it in [0, 1]", v));
      config.per_process_memory_fraction = v;
    } else if (key == "backend") {
      std::string backend = p.next(key, "a backend");
      if (backend == "cudaMallocAsync") {
        fail(key, "backend:cudaMallocAsync (the driver's pool) is not modelled; use native");
      }
      if (backend != "native") {
        fail(key, fmt::format("unknown allocator backend '{}', options are native and "
                              "cudaMallocAsync", backend));
      }
    } else if (key == "release_lock_on_cudamalloc" || key == "pinned_use_cuda_host_register" ||
               key == "pinned_use_background_threads" ||
               key == "graph_capture_record_stream_reuse") {
      p.bool_value(key);
    } else if (key == "pinned_num_register_threads") {
      std::uint64_t n = p.unsigned_value(key);
      if (!is_power_of_two(n)) fail(key, fmt::format("{} must be a power of 2", n));
    } else {
      fail(key, "unrecognized CachingAllocator option");
    }
    if (!p.done()) p.expect(key, ",");
  }
  return config;
}

std::string to_alloc_conf(const AllocConfig& config) {
  const AllocConfig defaults;
  std::vector<std::string> parts;
  if (config.expandable_segments) parts.emplace_back("expandable_segments:True");
  if (config.max_split_size != defaults.max_split_size) {
    parts.push_back(fmt::format("max_split_size_mb:{}", config.max_split_size / kMiB));
  }
  if (config.max_non_split_rounding != defaults.max_non_split_rounding) {
    parts.push_back(
        fmt::format("max_non_split_rounding_mb:{}", config.max_non_split_rounding / kMiB));
  }
  if (config.large_segment_size != defaults.large_segment_size) {
    parts.push_back(fmt::format("large_segment_size_mb:{}", config.large_segment_size / kMiB));
  }
  const auto& d = config.roundup_power2_divisions;
  if (d != defaults.roundup_power2_divisions) {
    if (std::all_of(d.begin(), d.end(), [&](std::uint32_t v) { return v == d[0]; })) {
      parts.push_back(fmt::format("roundup_power2_divisions:{}", d[0]));
    } else {
      // Interval 1 MiB first (it fills nothing below), then every other non-zero interval.
      std::string list = fmt::format("1:{}", d[0]);
      for (std::size_t i = 1; i < d.size(); ++i) {
        if (d[i] != 0) list += fmt::format(",{}:{}", 1ull << i, d[i]);
      }
      parts.push_back(fmt::format("roundup_power2_divisions:[{}]", list));
    }
  }
  if (config.garbage_collection_threshold != 0.0) {
    parts.push_back(
        fmt::format("garbage_collection_threshold:{}", config.garbage_collection_threshold));
  }
  if (config.per_process_memory_fraction) {
    parts.push_back(
        fmt::format("per_process_memory_fraction:{}", *config.per_process_memory_fraction));
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

}  // namespace fragscope::alloc

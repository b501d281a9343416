#include "inputs/input_kind.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "inputs/library_alloc_failure.h"
#include "inputs/training_log.h"
#include "snapshot/byte_source.h"
#include "util/error.h"
#include "util/input_file.h"

namespace fragscope::inputs {

namespace {

constexpr std::uint8_t kPickleProto = 0x80;

bool first_decompressed_byte_is_proto(std::span<const std::uint8_t> head) {
  try {
    auto source = snapshot::open_memory_source(head, "head");
    std::array<std::uint8_t, 2> first{};
    return source->read(first) == first.size() && first[0] == kPickleProto && first[1] >= 2 &&
           first[1] <= 5;
  } catch (const std::exception&) {
    return false;  // corrupt or cut off before the first bytes: not a readable pickle
  }
}

std::string_view first_line(std::string_view text) {
  const auto start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return {};
  text.remove_prefix(start);
  return text.substr(0, text.find('\n'));
}

/// A training log's failure the doctor reads (training_log.h): PyTorch's OOM message, a CUDA library's own
/// allocation that failed (library_alloc_failure.h), or cuDNN finding no plan.
bool has_failure_message(std::string_view text) {
  const auto oom = text.find("out of memory");
  return (oom != std::string_view::npos && text.find("Tried to allocate", oom) != std::string_view::npos) ||
         has_library_alloc_failure(text) || is_cudnn_no_plan_error(text);
}

bool is_text(std::string_view head) {
  return std::none_of(head.begin(), head.end(), [](char c) { return c == '\0'; });
}

InputKind classify_object(const nlohmann::json& object) {
  if (object.contains("step")) return InputKind::kTelemetryJsonl;
  for (const auto& [key, value] : object.items())
    if (key.starts_with("allocated_bytes.") || key.starts_with("reserved_bytes.") ||
        key == "allocated_bytes" || key == "reserved_bytes")  // flat or nested memory_stats
      return InputKind::kMemoryStatsJson;
  return InputKind::kUnknown;
}

InputKind classify_json(std::string_view text) {
  const auto line = first_line(text);
  if (!line.starts_with('{')) return InputKind::kUnknown;
  // One complete object on the first line: a JSONL record or one-line JSON.
  if (const auto object = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false); object.is_object())
    return classify_object(object);
  // A whole pretty-printed document within the head: judge its top-level keys.
  if (const auto document = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false); document.is_object())
    return classify_object(document);
  // Cut off by the head: look for flat memory_stats key names.
  for (const std::string_view key : {"\"allocated_bytes.all.", "\"reserved_bytes.all."})
    if (text.find(key) != std::string_view::npos) return InputKind::kMemoryStatsJson;
  return InputKind::kUnknown;
}

}  // namespace

std::string_view to_string(InputKind kind) {
  switch (kind) {
    case InputKind::kSnapshotPickle: return "snapshot-pickle";
    case InputKind::kMemoryStatsJson: return "memory-stats";
    case InputKind::kTelemetryJsonl: return "telemetry";
    case InputKind::kNvidiaSmiCsv: return "nvidia-smi";
    case InputKind::kMemorySummaryText: return "memory-summary";
    case InputKind::kOomLog: return "oom-log";
    case InputKind::kUnknown: break;
  }
  return "unknown";
}

InputKind detect_input_kind(std::span<const std::uint8_t> head) {
  head = head.first(std::min(head.size(), kInputKindHeadBytes));
  if (head.size() >= 2 && head[0] == kPickleProto && head[1] >= 2 && head[1] <= 5)
    return InputKind::kSnapshotPickle;
  if (snapshot::detect_compression(head) != snapshot::Compression::kNone)
    return first_decompressed_byte_is_proto(head) ? InputKind::kSnapshotPickle : InputKind::kUnknown;
  const std::string_view text(reinterpret_cast<const char*>(head.data()), head.size());
  if (!is_text(text)) return InputKind::kUnknown;
  if (text.find("memory summary, device ID") != std::string_view::npos &&
      text.find("Cur Usage") != std::string_view::npos)
    return InputKind::kMemorySummaryText;
  const auto line = first_line(text);
  if (line.find(',') != std::string_view::npos &&
      (line.find("memory.used") != std::string_view::npos ||
       line.find("utilization.gpu") != std::string_view::npos ||
       line.find("memory.total") != std::string_view::npos))
    return InputKind::kNvidiaSmiCsv;
  if (const auto kind = classify_json(text); kind != InputKind::kUnknown) return kind;
  if (has_failure_message(text)) return InputKind::kOomLog;
  return InputKind::kUnknown;
}

InputKind detect_input_kind_file(const std::filesystem::path& path) {
  InputFile file = open_input(path.string());
  std::vector<std::uint8_t> head(kInputKindHeadBytes);
  std::size_t filled = 0;
  while (filled < head.size()) {
    const std::size_t n = file.read(std::span(reinterpret_cast<char*>(head.data()) + filled, head.size() - filled));
    if (n == 0) break;
    filled += n;
  }
  head.resize(filled);
  const InputKind kind = detect_input_kind(head);
  if (kind != InputKind::kUnknown || head.size() < kInputKindHeadBytes) return kind;
  const std::string_view head_text(reinterpret_cast<const char*>(head.data()), head.size());
  if (!is_text(head_text)) return kind;
  // A long log: the OOM is usually near its end. Scan all of it, in overlapping chunks.
  constexpr std::size_t kChunk = 1 << 20;
  constexpr std::size_t kOverlap = 4096;
  std::string window(head_text.substr(head_text.size() - kOverlap));
  std::string chunk(kChunk, '\0');
  for (;;) {
    const std::size_t got = file.read(chunk);
    if (got == 0) break;
    window.append(chunk, 0, got);
    if (has_failure_message(window)) return InputKind::kOomLog;
    window.erase(0, window.size() - std::min(window.size(), kOverlap));
  }
  return InputKind::kUnknown;
}

}  // namespace fragscope::inputs

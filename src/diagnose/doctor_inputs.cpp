#include "diagnose/doctor_inputs.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "diagnose/rank_assignment.h"
#include "inputs/input_kind.h"
#include "inputs/memory_stats_reader.h"
#include "inputs/oom_message_parser.h"
#include "inputs/telemetry_reader.h"
#include "snapshot/snapshot_reader.h"
#include "util/error.h"

namespace fragscope::diagnose {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxFolderDepth = 3;

void add_folder(const fs::path& folder, int depth, std::vector<fs::path>& files) {
  std::vector<fs::path> entries;
  std::error_code error;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error))
    entries.push_back(it->path());
  if (error) throw InputError(fmt::format("{}: cannot list folder ({})", folder.string(), error.message()));
  std::sort(entries.begin(), entries.end());
  for (const fs::path& entry : entries) {
    if (fs::is_directory(entry, error)) {
      if (depth < kMaxFolderDepth) add_folder(entry, depth + 1, files);
    } else if (fs::is_regular_file(entry, error)) {
      files.push_back(entry);
    }
  }
}

std::vector<fs::path> expand(const std::vector<std::string>& paths) {
  std::vector<fs::path> files;
  for (const std::string& path : paths) {
    std::error_code error;
    const fs::file_status status = fs::status(path, error);
    if (error || !fs::exists(status)) throw InputError(fmt::format("{}: no such file or folder", path));
    if (fs::is_directory(status)) {
      add_folder(path, 1, files);
    } else {
      files.emplace_back(path);
    }
  }
  return files;
}

std::optional<int> telemetry_rank(const std::vector<inputs::StepRecord>& records) {
  for (const inputs::StepRecord& record : records)
    if (record.rank) return record.rank;
  return std::nullopt;
}

}  // namespace

bool DoctorInputs::any() const {
  return !snapshots.empty() || !telemetry.empty() || !stats.empty() || !smi.empty() ||
         !summaries.empty() || !logs.empty();
}

std::optional<int> rank_from_path(const std::string& path) {
  std::string lower = path;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::optional<int> rank;
  for (std::size_t at = lower.find("rank"); at != std::string::npos; at = lower.find("rank", at + 4)) {
    std::size_t digits = at + 4;
    if (digits < lower.size() && (lower[digits] == '_' || lower[digits] == '-')) ++digits;
    std::size_t end = digits;
    while (end < lower.size() && end - digits < 6 && std::isdigit(static_cast<unsigned char>(lower[end]))) ++end;
    if (end > digits) rank = std::stoi(lower.substr(digits, end - digits));
  }
  return rank;
}

DoctorInputs collect_doctor_inputs(const std::vector<std::string>& paths) {
  DoctorInputs inputs;
  for (const fs::path& file : expand(paths)) {
    const std::string path = file.string();
    switch (inputs::detect_input_kind_file(file)) {
      case inputs::InputKind::kSnapshotPickle: {
        SnapshotInput s{path, rank_from_path(path), snapshot::read_snapshot_file(path)};
        s.device = snapshot::busiest_device(s.snapshot);
        s.oom_index = snapshot::last_oom_index(s.snapshot, s.device);
        inputs.snapshots.push_back(std::move(s));
        break;
      }
      case inputs::InputKind::kTelemetryJsonl: {
        auto records = inputs::read_telemetry_file(file);
        const auto rank = telemetry_rank(records);
        inputs.telemetry.push_back({path, rank ? rank : rank_from_path(path), std::move(records)});
        break;
      }
      case inputs::InputKind::kMemoryStatsJson:
        inputs.stats.push_back({path, rank_from_path(path), inputs::read_memory_stats_file(file)});
        break;
      case inputs::InputKind::kNvidiaSmiCsv:
        inputs.smi.push_back({path, inputs::read_nvidia_smi_csv_file(file)});
        break;
      case inputs::InputKind::kMemorySummaryText:
        inputs.summaries.push_back({path, rank_from_path(path), inputs::read_memory_summary_file(file)});
        break;
      case inputs::InputKind::kOomLog: {
        auto ooms = inputs::read_oom_messages_file(file);
        if (ooms.empty()) {
          inputs.unrecognised.push_back(path);
        } else {
          inputs.logs.push_back({path, std::move(ooms)});
        }
        break;
      }
      case inputs::InputKind::kUnknown:
        inputs.unrecognised.push_back(path);
        break;
    }
  }
  assign_ranks(inputs);
  return inputs;
}

}  // namespace fragscope::diagnose

#include "diagnose/doctor_inputs.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "diagnose/rank_assignment.h"
#include "inputs/input_kind.h"
#include "inputs/memory_stats_reader.h"
#include "inputs/telemetry_reader.h"
#include "inputs/training_log.h"
#include "snapshot/snapshot_reader.h"
#include "util/error.h"
#include "util/input_file.h"
#include "util/shown_text.h"

namespace fragscope::diagnose {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxFolderDepth = 3;

/// The files of a doctor run, found by walking what the user gave.
class Walk {
 public:
  explicit Walk(DoctorInputs& in) : in_(in) {}

  void add_path(const std::string& path) {
    std::error_code error;
    const fs::file_status status = fs::status(path, error);
    if (error || !fs::exists(status)) throw InputError(fmt::format("{}: no such file or folder", path));
    if (fs::is_directory(status)) {
      const fs::path root = fs::canonical(path, error);
      if (error) throw InputError(fmt::format("{}: cannot list folder ({})", path, error.message()));
      add_folder(path, root, 1);
    } else {
      add_file(path);
    }
  }
  std::vector<fs::path> take() { return std::move(files_); }

 private:
  void skip(const fs::path& path, std::string reason) { in_.skipped.push_back({path.string(), std::move(reason)}); }

  void add_file(const fs::path& path) {
    const FileKind kind = file_kind(path.string());
    if (kind == FileKind::kMissing) return skip(path, "a symlink that leads nowhere");
    if (kind == FileKind::kFifo)  // detection reads its head, the reader reads it again: once is all a FIFO gives
      return skip(path, "a FIFO, not a regular file: the doctor reads each file more than once");
    if (kind != FileKind::kRegular) return skip(path, fmt::format("{}, not a regular file", describe(kind)));
    if (files_.size() < kMaxWalkedFiles) return files_.push_back(path);
    if (!capped_) skip(path, fmt::format("more than {} files: this one and the rest were not read", kMaxWalkedFiles));
    capped_ = true;
  }

  void add_folder(const fs::path& folder, const fs::path& root, int depth) {
    std::error_code error;
    const fs::path real = fs::canonical(folder, error);
    if (error || !visited_.insert(real.string()).second) return;  // a loop of links: each folder once
    std::vector<fs::path> entries;
    for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error))
      entries.push_back(it->path());
    if (error) throw InputError(fmt::format("{}: cannot list folder ({})", folder.string(), error.message()));
    std::sort(entries.begin(), entries.end());
    for (const fs::path& entry : entries) {
      const std::string name = entry.filename().string();
      if (one_line_safe(name) != name) {
        // Whoever may write the folder chose it: its name would forge lines or act on the terminal in the report.
        skip(entry, "a name with a control character, a bidirectional override or bytes that are not UTF-8: not read");
        continue;
      }
      const bool link = fs::is_symlink(fs::symlink_status(entry, error));
      if (fs::is_directory(fs::status(entry, error))) {
        if (link) {
          const fs::path target = fs::canonical(entry, error);
          const auto [outside, _] = std::mismatch(root.begin(), root.end(), target.begin(), target.end());
          if (error || outside != root.end()) {
            skip(entry, "a symlink to a folder outside the one given: not followed");
            continue;
          }
        }
        if (depth < kMaxFolderDepth) add_folder(entry, root, depth + 1);
      } else {
        add_file(entry);
      }
    }
  }

  DoctorInputs& in_;
  std::vector<fs::path> files_;
  bool capped_ = false;
  std::set<std::string> visited_;
};

// "PATH: problem" → "problem", "PATH:LINE: problem" → "line LINE: problem": the skip list
// names the path already.
std::string reason_of(const InputError& e, const std::string& path) {
  std::string_view what = e.what();
  if (!what.starts_with(path) || !what.substr(path.size()).starts_with(':')) return std::string(what);
  what.remove_prefix(path.size() + 1);
  if (what.starts_with(' ')) return std::string(what.substr(1));
  return "line " + std::string(what);
}

std::optional<int> telemetry_rank(const std::vector<inputs::StepRecord>& records) {
  for (const inputs::StepRecord& record : records)
    if (record.rank) return record.rank;
  return std::nullopt;
}

}  // namespace

bool DoctorInputs::any() const {
  return !snapshots.empty() || !telemetry.empty() || !stats.empty() || !smi.empty() ||
         !summaries.empty() || !logs.empty() || !library_failures.empty();
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

namespace {

// Recognises the file and reads it into `inputs`. @throws InputError when it cannot be read.
void read_input(const fs::path& file, const snapshot::ReadLimits& limits, const Progress& progress,
                DoctorInputs& inputs) {
  const std::string path = file.string();
  switch (inputs::detect_input_kind_file(file)) {
    case inputs::InputKind::kSnapshotPickle: {
      SnapshotInput s;
      s.path = path;
      s.rank = rank_from_path(path);
      s.snapshot = snapshot::read_snapshot_file(path, snapshot::read_progress(progress, path), limits);
      s.device = snapshot::busiest_device(s.snapshot);
      s.oom_index = snapshot::fatal_oom_index(s.snapshot, s.device);
      s.survived = snapshot::survived_ooms(s.snapshot, s.device);
      inputs.snapshots.push_back(std::move(s));
      break;
    }
    case inputs::InputKind::kTelemetryJsonl: {
      inputs::TelemetryNotes notes;
      auto records = inputs::read_telemetry_file(file, &notes);
      const auto rank = telemetry_rank(records);
      inputs.telemetry.push_back({path, rank ? rank : rank_from_path(path), std::move(records), notes.cut_last_line});
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
      inputs::TrainingLog log = inputs::read_training_log_file(file);
      if (!log.any()) inputs.unrecognised.push_back(path);
      if (!log.oom_messages.empty()) inputs.logs.push_back({path, std::move(log.oom_messages)});
      if (!log.library_failures.empty()) inputs.library_failures.push_back({path, std::move(log.library_failures)});
      if (log.cudnn_no_plan_line)
        inputs.cudnn_no_plan.push_back({path, *log.cudnn_no_plan_line, log.cudnn_no_plan_rank});
      break;
    }
    case inputs::InputKind::kUnknown:
      inputs.unrecognised.push_back(path);
      break;
  }
}

}  // namespace

DoctorInputs collect_doctor_inputs(const std::vector<std::string>& paths, const snapshot::ReadLimits& limits,
                                   const Progress& progress) {
  DoctorInputs inputs;
  Walk walk(inputs);
  for (const std::string& path : paths) walk.add_path(path);
  for (const fs::path& file : walk.take()) {
    const std::string path = file.string();
    if (const auto identity = identity_of(path)) inputs.files.push_back(*identity);
    try {
      read_input(file, limits, progress, inputs);
    } catch (const InputError& e) {
      inputs.skipped.push_back({path, reason_of(e, path)});
    }
  }
  assign_ranks(inputs);
  // A log saying cuDNN found no plan tells how the run of each snapshot of its rank ended (of every snapshot when
  // the line or the snapshot has no rank), whatever the order they came in.
  for (SnapshotInput& s : inputs.snapshots) {
    const auto told = std::find_if(inputs.cudnn_no_plan.begin(), inputs.cudnn_no_plan.end(),
                                   [&](const CudnnNoPlanInput& l) { return may_be_same_rank(l.rank, s.rank); });
    if (told == inputs.cudnn_no_plan.end()) continue;
    s.cudnn_no_plan = *told;
    s.oom_index = snapshot::fatal_oom_index(s.snapshot, s.device, s.run_end());
    s.survived = snapshot::survived_ooms(s.snapshot, s.device, s.run_end());
  }
  return inputs;
}

}  // namespace fragscope::diagnose

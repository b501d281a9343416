#include "diagnose/rank_assignment.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace fragscope::diagnose {
namespace {

std::string folder_of(const std::string& path) {
  const std::string folder = std::filesystem::path(path).parent_path().string();
  return folder.empty() ? "." : folder;
}

/// One input of any kind: its path and its rank, to read and fill.
struct Slot {
  std::string kind;
  const std::string* path;
  std::optional<int>* rank;
};

std::vector<Slot> slots_of(DoctorInputs& in) {
  std::vector<Slot> slots;
  for (auto& s : in.snapshots) slots.push_back({"snapshot", &s.path, &s.rank});
  for (auto& t : in.telemetry) slots.push_back({"telemetry", &t.path, &t.rank});
  for (auto& s : in.stats) slots.push_back({"memory_stats", &s.path, &s.rank});
  for (auto& s : in.summaries) slots.push_back({"memory_summary", &s.path, &s.rank});
  return slots;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace

void assign_ranks(DoctorInputs& in) {
  std::vector<Slot> slots = slots_of(in);
  std::set<int> taken;
  for (const Slot& s : slots)
    if (*s.rank) taken.insert(**s.rank);
  for (const LogInput& log : in.logs)
    for (const auto& m : log.ooms)
      if (m.rank) taken.insert(*m.rank);

  // By content: rank-less snapshots of one folder tracing different devices.
  std::map<std::string, std::set<int>> devices_in;  // folder → devices of its rank-less snapshots
  for (const SnapshotInput& s : in.snapshots)
    if (!s.rank) devices_in[folder_of(s.path)].insert(s.device);
  for (const auto& [folder, devices] : devices_in) {
    if (devices.size() < 2) continue;
    std::vector<std::string> told;
    for (SnapshotInput& s : in.snapshots) {
      if (s.rank || folder_of(s.path) != folder) continue;
      s.rank = s.device;
      taken.insert(s.device);
      told.push_back(fmt::format("{} → rank {}", s.path, s.device));
    }
    in.warnings.push_back(
        fmt::format("snapshots without a rank<N> in their path trace different devices in {}: each "
                    "device read as its process's rank ({})",
                    folder, join(told)));
  }

  // By folder: a kind whose rank-less inputs sit in several folders.
  std::map<std::string, std::set<std::string>> folders_of_kind;
  for (const Slot& s : slots)
    if (!*s.rank) folders_of_kind[s.kind].insert(folder_of(*s.path));
  std::set<std::string> split;
  for (const auto& [kind, folders] : folders_of_kind)
    if (folders.size() >= 2) split.insert(folders.begin(), folders.end());
  if (!split.empty()) {
    std::map<std::string, int> rank_of;
    int next = 0;
    std::vector<std::string> told;
    for (const std::string& folder : split) {
      while (taken.contains(next)) ++next;
      rank_of[folder] = next;
      taken.insert(next);
      told.push_back(fmt::format("{} → rank {}", folder, next));
    }
    std::vector<std::string> left;
    for (Slot& s : slots) {
      if (*s.rank) continue;
      if (const auto it = rank_of.find(folder_of(*s.path)); it != rank_of.end())
        *s.rank = it->second;
      else
        left.push_back(*s.path);
    }
    in.warnings.push_back(
        fmt::format("inputs without a rank<N> in their path come from {} folders: each folder read as one "
                    "rank ({})",
                    split.size(), join(told)));
    if (!left.empty())
      in.warnings.push_back(fmt::format("{} cannot be tied to one of those ranks: read as rank 0", join(left)));
  }

  // What stays merged: one kind, one rank, different folders.
  std::map<std::pair<std::string, int>, std::string> first;  // (kind, rank) → folder
  for (const Slot& s : slots) {
    const int rank = s.rank->value_or(0);
    const auto [it, added] = first.try_emplace({s.kind, rank}, folder_of(*s.path));
    if (!added && it->second != folder_of(*s.path))
      in.warnings.push_back(
          fmt::format("two {} inputs read as rank {} from different folders ({} and {}): their figures are "
                      "merged; name them rank<N> to tell them apart",
                      s.kind, rank, it->second, folder_of(*s.path)));
  }
}

}  // namespace fragscope::diagnose

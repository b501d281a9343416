#pragma once
// Test support: locate the recorded H200 fixtures and read their truth.json.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fragscope::testing {

inline std::filesystem::path fixtures_dir() { return FRAGSCOPE_FIXTURES_DIR; }

/// Every (scenario, snapshot file, truth object) pair: snapshot.pickle.zst against the top
/// level of truth.json, snapshot_at_oom.pickle.zst against its "at_oom" object.
struct SnapshotFixture {
  std::string name;
  std::filesystem::path snapshot;
  nlohmann::json truth;
  nlohmann::json scenario_truth;  // the whole truth.json
};

/// How gtest shows a fixture in its output: by name, not by the struct's bytes.
inline void PrintTo(const SnapshotFixture& f, std::ostream* os) { *os << f.name; }

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

inline std::vector<SnapshotFixture> snapshot_fixtures() {
  std::vector<SnapshotFixture> result;
  std::vector<std::filesystem::path> dirs;
  for (const auto& entry : std::filesystem::directory_iterator(fixtures_dir()))
    if (entry.is_directory()) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    if (!std::filesystem::exists(dir / "truth.json")) continue;
    const auto truth = read_json(dir / "truth.json");
    const std::string name = dir.filename().string();
    if (std::filesystem::exists(dir / "snapshot.pickle.zst"))
      result.push_back({name, dir / "snapshot.pickle.zst", truth, truth});
    if (std::filesystem::exists(dir / "snapshot_at_oom.pickle.zst") && truth.contains("at_oom"))
      result.push_back({name + "_at_oom", dir / "snapshot_at_oom.pickle.zst", truth["at_oom"], truth});
  }
  return result;
}

}  // namespace fragscope::testing

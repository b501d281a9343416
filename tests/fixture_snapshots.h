#pragma once
// Test support: the recorded end-state snapshots with the memory_stats() taken at the same
// moment (stats.json: PyTorch's own counters, an independent check of what fragscope measures),
// each snapshot read once per test binary.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fixture_support.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::testing {

/// The snapshot at `path`, read on first use and kept for the test binary's life.
inline const snapshot::Snapshot& fixture_snapshot(const std::filesystem::path& path) {
  static std::map<std::string, snapshot::Snapshot> cache;
  auto it = cache.find(path.string());
  if (it == cache.end()) it = cache.emplace(path.string(), snapshot::read_snapshot_file(path.string())).first;
  return it->second;
}

struct EndStateFixture {
  std::string name;
  std::filesystem::path snapshot;  ///< snapshot.pickle.zst
  nlohmann::json truth;            ///< truth.json
  nlohmann::json stats;            ///< stats.json: torch.cuda.memory_stats() at the same moment
  const snapshot::Snapshot& read() const { return fixture_snapshot(snapshot); }
  bool expandable() const { return truth["allocator_settings"].value("expandable_segments", false); }
  bool oom() const { return truth.contains("oom_event") && !truth["oom_event"].is_null(); }
};

inline void PrintTo(const EndStateFixture& f, std::ostream* out) { *out << f.name; }

/// Every scenario with snapshot.pickle.zst, truth.json and stats.json, in name order.
inline std::vector<EndStateFixture> end_state_fixtures() {
  std::vector<EndStateFixture> result;
  for (const auto& f : snapshot_fixtures()) {
    const auto dir = f.snapshot.parent_path();
    if (f.snapshot.filename() != "snapshot.pickle.zst" || !std::filesystem::exists(dir / "stats.json")) continue;
    result.push_back({f.name, f.snapshot, f.truth, read_json(dir / "stats.json")});
  }
  return result;
}

/// The end-state fixtures whose run died of an OOM (truth.json has an oom_event).
inline std::vector<EndStateFixture> oom_fixtures() {
  std::vector<EndStateFixture> result;
  for (auto& f : end_state_fixtures())
    if (f.oom()) result.push_back(std::move(f));
  return result;
}

inline std::string fixture_name(const ::testing::TestParamInfo<EndStateFixture>& info) { return info.param.name; }

}  // namespace fragscope::testing

#include "fixture_util.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "snapshot/snapshot_reader.h"

namespace fragscope::replay::testing {

std::string fixture_path(const std::string& scenario, const std::string& file) {
  return std::string(FRAGSCOPE_FIXTURES_DIR) + "/" + scenario + "/" + file;
}

std::vector<std::string> snapshot_scenarios() {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(FRAGSCOPE_FIXTURES_DIR)) {
    if (std::filesystem::exists(entry.path() / "snapshot.pickle.zst") &&
        std::filesystem::exists(entry.path() / "truth.json")) {
      out.push_back(entry.path().filename().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

nlohmann::json read_truth(const std::string& scenario) {
  std::ifstream in(fixture_path(scenario, "truth.json"));
  return nlohmann::json::parse(in);
}

PreparedTrace prepare_fixture(const std::string& scenario, const std::string& file) {
  const std::string path = fixture_path(scenario, file);
  const snapshot::Snapshot snap = snapshot::read_snapshot_file(path);
  return prepare_trace(snap, snapshot::busiest_device(snap), path);
}

}  // namespace fragscope::replay::testing

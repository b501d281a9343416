#pragma once
/// @file fixture_util.h
/// @brief Shared by the replay tests: the recorded fixtures and their truth.json.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "replay/prepared_trace.h"
#include "snapshot/snapshot.h"

namespace fragscope::replay::testing {

/// @brief <fixtures>/<scenario>/<file>.
std::string fixture_path(const std::string& scenario, const std::string& file = "snapshot.pickle.zst");
/// @brief Scenarios with both a snapshot.pickle.zst and a truth.json, sorted.
std::vector<std::string> snapshot_scenarios();
nlohmann::json read_truth(const std::string& scenario);
/// @brief Reads and prepares a fixture's snapshot (busiest device).
PreparedTrace prepare_fixture(const std::string& scenario,
                              const std::string& file = "snapshot.pickle.zst");

}  // namespace fragscope::replay::testing

// One poll's view of the node: only the readable ranks are kept (every state counted), each
// labelled with the GPU NVML knows by the rank's UUID (with or without "GPU-"), else with the
// hook's own device index.
#include "agent/node_view.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "agent/rank_selection.h"

namespace fragscope::agent {
namespace {

RankFileReading reading(const std::string& name, RankFileState state, std::int32_t gpu, const std::string& uuid) {
  RankFileReading r;
  r.name = name;
  r.state = state;
  r.owner_uid = 1000;
  r.owner_gid = 100;
  r.record.rank = std::stoi(name.substr(name.find("rank") + 4));
  r.record.gpu = gpu;
  r.record.gpu_uuid = uuid;
  return r;
}

TEST(NodeView, KeepsTheReadableRanksAndLabelsThemWithTheirGpu) {
  NvmlSample nvml;
  nvml.up = true;
  nvml.gpus.resize(2);
  nvml.gpus[0].index = 0;
  nvml.gpus[0].uuid = "GPU-0b3c6f5e-1a2b-3c4d-5e6f-000000000000";
  nvml.gpus[1].index = 1;
  nvml.gpus[1].uuid = "GPU-0b3c6f5e-1a2b-3c4d-5e6f-000000000001";
  std::vector<RankFileReading> readings = {
      reading("rank0-pid1.fsr", RankFileState::kOk, 3, "0b3c6f5e-1a2b-3c4d-5e6f-000000000001"),  // torch's spelling
      reading("rank1-pid2.fsr", RankFileState::kOk, 5, "GPU-0b3c6f5e-1a2b-3c4d-5e6f-000000000000"),
      reading("rank2-pid3.fsr", RankFileState::kOk, 2, ""),  // no UUID: the hook's index
      reading("rank3-pid4.fsr", RankFileState::kOk, 6, "GPU-ffffffff-0000-0000-0000-000000000000"),  // unknown
      reading("rank4-pid5.fsr", RankFileState::kTorn, 0, ""),
      reading("rank5-pid6.fsr", RankFileState::kStale, 0, ""),
      reading("rank6-pid7.fsr", RankFileState::kInvalid, 0, ""),
      reading("rank7-pid8.fsr", RankFileState::kInvalid, 0, "")};
  const NodeView view = make_node_view(42, std::move(readings), nvml);
  EXPECT_EQ(view.unix_ns, 42u);
  ASSERT_EQ(view.ranks.size(), 4u);
  std::vector<std::int32_t> gpus;
  for (const RankView& r : view.ranks) gpus.push_back(r.gpu);
  EXPECT_EQ(gpus, (std::vector<std::int32_t>{1, 0, 2, 6}));
  EXPECT_EQ(view.ranks[0].file_name, "rank0-pid1.fsr");
  EXPECT_EQ(view.ranks[0].owner_uid, 1000u);
  EXPECT_EQ(view.ranks[0].owner_gid, 100u);
  EXPECT_EQ(view.files_by_state[static_cast<std::size_t>(RankFileState::kOk)], 4u);
  EXPECT_EQ(view.files_by_state[static_cast<std::size_t>(RankFileState::kTorn)], 1u);
  EXPECT_EQ(view.files_by_state[static_cast<std::size_t>(RankFileState::kStale)], 1u);
  EXPECT_EQ(view.files_by_state[static_cast<std::size_t>(RankFileState::kInvalid)], 2u);
  ASSERT_NE(view.gpu(1), nullptr);
  EXPECT_EQ(view.gpu(1)->uuid, nvml.gpus[1].uuid);
  EXPECT_EQ(view.gpu(6), nullptr);
  EXPECT_EQ(view.ranks_dropped, 0u);
}

// Measured before the caps: 4,096 forged top-level files with 64-character job names made a
// 16 MB page and a 128 MB agent; every one was exported, evaluated and logged.
TEST(NodeView, AFloodOfForgedRanksIsCappedAndLeavesTheOtherUsersTheirs) {
  std::vector<RankFileReading> readings;
  for (int i = 0; i < 5000; ++i) {
    RankFileReading forged = reading("rank" + std::to_string(i) + "-pid1.fsr", RankFileState::kOk, 0, "");
    forged.owner_uid = 4242;
    forged.record.job = "forged-" + std::to_string(i);
    readings.push_back(forged);
  }
  RankFileReading victim = reading("1000/rank0-pid7.fsr", RankFileState::kOk, 1, "");
  victim.in_user_folder = true;
  readings.push_back(victim);
  const NodeView view = make_node_view(42, std::move(readings), NvmlSample{});
  EXPECT_EQ(view.ranks.size(), kMaxRanksPerOwner + 1);
  EXPECT_EQ(view.ranks_dropped, 5000 - kMaxRanksPerOwner);
  EXPECT_EQ(view.owners_dropped, std::set<uid_t>{4242});
  EXPECT_TRUE(std::any_of(view.ranks.begin(), view.ranks.end(),
                          [](const RankView& rank) { return rank.file_name == "1000/rank0-pid7.fsr"; }));
  EXPECT_EQ(view.files_by_state[static_cast<std::size_t>(RankFileState::kOk)], 5001u);
}

}  // namespace
}  // namespace fragscope::agent

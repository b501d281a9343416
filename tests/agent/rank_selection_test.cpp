// Which live ranks the agent tracks: one per owner, job and rank; per-user folders first; the
// node's room shared fairly between owners, so one user's flood cannot push out the others.
#include "agent/rank_selection.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace fragscope::agent {
namespace {

RankView rank_of(uid_t owner, bool in_user_folder, std::int32_t rank, std::uint64_t updated,
                 const std::string& job = "job") {
  RankView view;
  view.owner_uid = owner;
  view.in_user_folder = in_user_folder;
  view.record.rank = rank;
  view.record.job = job;
  view.record.update_unix_ns = updated;
  view.file_name = (in_user_folder ? std::to_string(owner) + "/" : std::string()) + "rank" + std::to_string(rank) +
                   "-pid" + std::to_string(updated) + ".fsr";
  return view;
}

std::map<uid_t, std::size_t> kept_by_owner(const RankSelection& selection) {
  std::map<uid_t, std::size_t> counts;
  for (const auto& rank : selection.kept) ++counts[rank.owner_uid];
  return counts;
}

TEST(RankSelection, ARestartedRankKeepsOnlyItsNewestFile) {
  const auto selection = select_ranks({rank_of(1000, true, 0, 100), rank_of(1000, true, 0, 200)});
  ASSERT_EQ(selection.kept.size(), 1u);
  EXPECT_EQ(selection.kept[0].record.update_unix_ns, 200u);
  EXPECT_EQ(selection.dropped, 0u);  // an old file of a kept rank is no loss
}

TEST(RankSelection, TheOwnersFolderWinsOverTheTopLevelEvenWhenOlder) {
  const auto selection = select_ranks({rank_of(1000, false, 0, 900), rank_of(1000, true, 0, 100)});
  ASSERT_EQ(selection.kept.size(), 1u);
  EXPECT_TRUE(selection.kept[0].in_user_folder);
}

TEST(RankSelection, TwoOwnersWithTheSameJobAndRankAreBothKept) {
  const auto selection = select_ranks({rank_of(1000, true, 0, 100), rank_of(4242, false, 0, 900)});
  EXPECT_EQ(kept_by_owner(selection), (std::map<uid_t, std::size_t>{{1000, 1}, {4242, 1}}));
}

TEST(RankSelection, AFloodOfOneOwnerIsCappedAndCounted) {
  std::vector<RankView> ranks;
  for (int i = 0; i < 5000; ++i) ranks.push_back(rank_of(4242, false, i, 1000 + i));
  for (int i = 0; i < 3; ++i) ranks.push_back(rank_of(1000, true, i, 10));
  for (int i = 0; i < 3; ++i) ranks.push_back(rank_of(1001, false, i, 10));
  const auto selection = select_ranks(std::move(ranks));
  EXPECT_EQ(kept_by_owner(selection), (std::map<uid_t, std::size_t>{{1000, 3}, {1001, 3}, {4242, kMaxRanksPerOwner}}));
  EXPECT_EQ(selection.dropped, 5000 - kMaxRanksPerOwner);
  EXPECT_EQ(selection.owners_dropped, std::set<uid_t>{4242});
  // The flooder's newest are the ones kept.
  for (const auto& rank : selection.kept) {
    if (rank.owner_uid == 4242) {
      EXPECT_GE(rank.record.update_unix_ns, 1000u + 5000 - kMaxRanksPerOwner);
    }
  }
  EXPECT_TRUE(std::is_sorted(selection.kept.begin(), selection.kept.end(),
                             [](const RankView& a, const RankView& b) { return a.file_name < b.file_name; }));
}

TEST(RankSelection, PerUserFoldersAreGrantedRoomBeforeTheTopLevel) {
  std::vector<RankView> ranks;
  for (int i = 0; i < 8; ++i) ranks.push_back(rank_of(1000, true, i, 1));
  for (int i = 0; i < 8; ++i) ranks.push_back(rank_of(4242, false, i, 2));
  const auto selection = select_ranks(std::move(ranks), {.node = 10, .per_owner = 10});
  EXPECT_EQ(kept_by_owner(selection), (std::map<uid_t, std::size_t>{{1000, 8}, {4242, 2}}));
  EXPECT_EQ(selection.dropped, 6u);
}

TEST(RankSelection, TheRoomIsSharedMaxMinFairly) {
  std::vector<RankView> ranks;
  for (int i = 0; i < 2; ++i) ranks.push_back(rank_of(1, false, i, 1));
  for (int i = 0; i < 100; ++i) ranks.push_back(rank_of(2, false, i, 1));
  for (int i = 0; i < 100; ++i) ranks.push_back(rank_of(3, false, i, 1));
  const auto selection = select_ranks(std::move(ranks), {.node = 10, .per_owner = 10});
  EXPECT_EQ(kept_by_owner(selection), (std::map<uid_t, std::size_t>{{1, 2}, {2, 4}, {3, 4}}));
  EXPECT_EQ(selection.owners_dropped, (std::set<uid_t>{2, 3}));
}

TEST(RankSelection, AnOwnersCapCountsBothFolders) {
  std::vector<RankView> ranks;
  for (int i = 0; i < 6; ++i) ranks.push_back(rank_of(1000, true, i, 1));
  for (int i = 6; i < 12; ++i) ranks.push_back(rank_of(1000, false, i, 1));
  const auto selection = select_ranks(std::move(ranks), {.node = 100, .per_owner = 8});
  ASSERT_EQ(selection.kept.size(), 8u);
  const auto in_folder = [](const RankView& rank) { return rank.in_user_folder; };
  EXPECT_EQ(std::count_if(selection.kept.begin(), selection.kept.end(), in_folder), 6);
}

}  // namespace
}  // namespace fragscope::agent

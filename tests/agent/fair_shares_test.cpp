// Max-min fair shares: how the rank caps, a scan's readings and its listing are split between owners and folders.
#include "agent/fair_shares.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace fragscope::agent {
namespace {

TEST(FairShares, WhoWantsLessThanAnEqualShareGetsAllOfItTheOthersSplitTheRest) {
  const std::map<std::string, std::size_t> wanted{{"flood-a", 1000}, {"flood-b", 1000}, {"honest", 2}};
  EXPECT_EQ(fair_shares(wanted, 100),
            (std::map<std::string, std::size_t>{{"flood-a", 49}, {"flood-b", 49}, {"honest", 2}}));
}

TEST(FairShares, EnoughRoomGivesEachWhatItWants) {
  const std::map<int, std::size_t> wanted{{1, 3}, {2, 0}, {3, 7}};
  EXPECT_EQ(fair_shares(wanted, 100), wanted);
}

TEST(FairShares, TheSharesFillTheRoomAndAreEqualWithinOne) {
  const std::map<int, std::size_t> wanted{{1, 50}, {2, 50}, {3, 50}};
  const auto shares = fair_shares(wanted, 100);
  EXPECT_EQ(shares.at(1) + shares.at(2) + shares.at(3), 100u);
  for (const auto& [key, share] : shares) {
    EXPECT_GE(share, 33u);
    EXPECT_LE(share, 34u);
  }
}

// What each taker of `needs`, in that order, gets of `room` shared in turn.
std::vector<std::size_t> taken_in_turn(const std::vector<std::size_t>& needs, std::size_t room) {
  SharesInTurn shares(room, needs.size());
  std::vector<std::size_t> taken;
  for (const std::size_t need : needs) {
    taken.push_back(std::min(need, shares.offer()));
    shares.take(taken.back());
  }
  return taken;
}

TEST(FairSharesInTurn, TakenInIncreasingOrderOfNeedTheSharesAreFairShares) {
  EXPECT_EQ(taken_in_turn({2, 30, 1000, 1000}, 100), (std::vector<std::size_t>{2, 30, 34, 34}));
  EXPECT_EQ(fair_shares(std::map<int, std::size_t>{{0, 2}, {1, 30}, {2, 1000}, {3, 1000}}, 100),
            (std::map<int, std::size_t>{{0, 2}, {1, 30}, {2, 34}, {3, 34}}));
}

TEST(FairSharesInTurn, InAnyOrderWhoNeedsNoMoreThanAnEqualShareGetsAllOfIt) {
  // The small one last: the large ones before it took an equal share each, not all of it.
  EXPECT_EQ(taken_in_turn({1000, 1000, 1000, 25}, 100), (std::vector<std::size_t>{25, 25, 25, 25}));
  // What one leaves goes to those after it; the last is offered all that is left.
  EXPECT_EQ(taken_in_turn({1000, 0, 1000, 1000}, 103), (std::vector<std::size_t>{25, 0, 39, 39}));
  EXPECT_EQ(taken_in_turn({}, 100), std::vector<std::size_t>{});
}

}  // namespace
}  // namespace fragscope::agent

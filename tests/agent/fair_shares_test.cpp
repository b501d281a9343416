// Max-min fair shares: how the rank caps and a scan's readings are split between owners and folders.
#include "agent/fair_shares.h"

#include <map>
#include <string>

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

}  // namespace
}  // namespace fragscope::agent

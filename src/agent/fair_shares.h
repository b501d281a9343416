#pragma once
/// @file fair_shares.h
/// @brief Max-min fair shares: how the agent's caps split what they allow between those who want
/// it (owners for the ranks tracked, rank_selection.h; folders and owners for a poll's readings and
/// folders for its listing, rank_file_reader.h), so that one who wants a lot cannot take what another needs.

#include <algorithm>
#include <cstddef>
#include <map>
#include <utility>
#include <vector>

namespace fragscope::agent {

/// @brief Shares of `room` for `wanted` (per key): those who want least are served first, each
/// with at most an equal share of what is left, so whoever wants less than an equal share gets all
/// of it and the others split the rest. The shares add up to min(room, total wanted).
template <typename Key>
std::map<Key, std::size_t> fair_shares(const std::map<Key, std::size_t>& wanted, std::size_t room) {
  std::vector<std::pair<std::size_t, Key>> by_need;
  by_need.reserve(wanted.size());
  for (const auto& [key, count] : wanted) by_need.emplace_back(count, key);
  std::sort(by_need.begin(), by_need.end());
  std::map<Key, std::size_t> shares;
  for (std::size_t i = 0; i < by_need.size(); ++i) {
    const std::size_t share = std::min(by_need[i].first, room / (by_need.size() - i));
    shares[by_need[i].second] = share;
    room -= share;
  }
  return shares;
}

/// @brief fair_shares for takers who learn what they need only by taking it (a folder's listing):
/// each in turn is offered an equal share of what is left, and what it leaves stays for those after it.
/// Every taker is offered at least room / takers, so one that needs no more gets all it needs whatever
/// the others do; taken in increasing order of need, the shares are fair_shares'.
class SharesInTurn {
 public:
  SharesInTurn(std::size_t room, std::size_t takers) : left_(room), takers_(takers) {}

  /// What the next taker may use.
  std::size_t offer() const { return takers_ > 1 ? left_ / takers_ : left_; }

  /// The next taker used `used` of its offer; the turn passes.
  void take(std::size_t used) {
    left_ -= std::min(used, left_);
    if (takers_ > 0) --takers_;
  }

 private:
  std::size_t left_;
  std::size_t takers_;
};

}  // namespace fragscope::agent

#include "agent/rank_selection.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "agent/fair_shares.h"

namespace fragscope::agent {
namespace {

/// Which of two files of the same rank stands for it.
bool stands_before(const RankView& a, const RankView& b) {
  if (a.in_user_folder != b.in_user_folder) return a.in_user_folder;
  if (a.record.update_unix_ns != b.record.update_unix_ns) return a.record.update_unix_ns > b.record.update_unix_ns;
  return a.file_name < b.file_name;
}

std::vector<RankView> one_per_rank(std::vector<RankView> ranks) {
  std::map<std::tuple<uid_t, std::string, std::int32_t>, std::size_t> best;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const auto [found, inserted] = best.try_emplace({ranks[i].owner_uid, ranks[i].record.job, ranks[i].record.rank}, i);
    if (!inserted && stands_before(ranks[i], ranks[found->second])) found->second = i;
  }
  std::vector<RankView> out;
  out.reserve(best.size());
  for (const auto& [key, index] : best) out.push_back(std::move(ranks[index]));
  return out;
}

}  // namespace

RankSelection select_ranks(std::vector<RankView> ranks, const RankCaps& caps) {
  std::vector<RankView> candidates = one_per_rank(std::move(ranks));
  // Tier by tier (per-user folders, then the top level), each owner's newest first.
  std::sort(candidates.begin(), candidates.end(), [](const RankView& a, const RankView& b) {
    if (a.in_user_folder != b.in_user_folder) return a.in_user_folder;
    if (a.owner_uid != b.owner_uid) return a.owner_uid < b.owner_uid;
    return stands_before(a, b);
  });
  RankSelection selection;
  std::map<uid_t, std::size_t> granted;
  std::size_t room = caps.node;
  for (auto tier = candidates.begin(); tier != candidates.end();) {
    const auto tier_end = std::find_if(
        tier, candidates.end(), [&](const RankView& rank) { return rank.in_user_folder != tier->in_user_folder; });
    std::map<uid_t, std::size_t> wanted;
    for (auto it = tier; it != tier_end; ++it) {
      std::size_t& count = wanted[it->owner_uid];
      if (granted[it->owner_uid] + count < caps.per_owner) ++count;
    }
    std::map<uid_t, std::size_t> shares = fair_shares(wanted, room);
    for (auto it = tier; it != tier_end; ++it) {
      std::size_t& share = shares[it->owner_uid];
      if (share == 0) {
        ++selection.dropped;
        selection.owners_dropped.insert(it->owner_uid);
        continue;
      }
      --share;
      --room;
      ++granted[it->owner_uid];
      selection.kept.push_back(std::move(*it));
    }
    tier = tier_end;
  }
  std::sort(selection.kept.begin(), selection.kept.end(),
            [](const RankView& a, const RankView& b) { return a.file_name < b.file_name; });
  return selection;
}

}  // namespace fragscope::agent

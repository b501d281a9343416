#include "agent/checkpoint_acks.h"

#include <set>

namespace fragscope::agent {

void CheckpointAckCounter::observe(const NodeView& view) {
  std::set<std::string> live;
  for (const auto& rank : view.ranks) {
    live.insert(rank.file_name);
    const std::uint64_t ack = rank.record.checkpoint_ack;
    const auto [last, first_sight] = last_ack_.try_emplace(rank.file_name, ack);
    std::uint64_t& count = counts_[rank.file_name];
    if (!first_sight && ack > last->second) ++count;
    last->second = ack;
  }
  std::erase_if(last_ack_, [&](const auto& entry) { return !live.contains(entry.first); });
  std::erase_if(counts_, [&](const auto& entry) { return !live.contains(entry.first); });
}

}  // namespace fragscope::agent

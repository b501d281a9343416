#pragma once
/// @file checkpoint_acks.h
/// @brief Counts the checkpoints ranks took on the agent's request (fragscope_checkpoint_acks_total).
///
/// The rank file holds only the id of the last request the rank handled (`checkpoint_ack`), and
/// ids skip when the agent rewrites a request before the rank reads it; one rise of that id is
/// one checkpoint. The count therefore lives in the agent, per rank file, from the moment the
/// agent first sees the rank (a restarted agent starts again at 0, as a Prometheus counter may).

#include <cstdint>
#include <map>
#include <string>

#include "agent/node_view.h"

namespace fragscope::agent {

class CheckpointAckCounter {
 public:
  /// @brief Counts every rank whose checkpoint_ack rose since the last view; forgets ranks
  /// that are no longer in `view`.
  void observe(const NodeView& view);

  /// @brief Acks counted so far, by rank file name.
  const std::map<std::string, std::uint64_t>& counts() const { return counts_; }

 private:
  std::map<std::string, std::uint64_t> last_ack_;
  std::map<std::string, std::uint64_t> counts_;
};

}  // namespace fragscope::agent

#pragma once
/// @file rank_selection.h
/// @brief Which of a poll's live ranks the agent tracks (exports, evaluates, acts on): one per
/// owner, training job and rank, and no more than the node's and each owner's caps, shared so
/// that one user's flood of rank files cannot push out the others' ranks.

#include <sys/types.h>

#include <cstddef>
#include <set>
#include <vector>

#include "agent/node_view.h"

namespace fragscope::agent {

/// @brief At most this many ranks are tracked per node. A node of 8 GPUs × 64 ranks (the 512 ranks
/// of docs/PERFORMANCE.md) fits twice; the largest page it allows (every job name 64 bytes of
/// invalid UTF-8, each byte escaped to 3) stays under 10 MB, well inside the DaemonSet's 128 MiB
/// with the server's own bound on pages in flight (docs/SECURITY.md).
inline constexpr std::size_t kMaxRanksPerNode = 1024;

/// @brief At most this many ranks are tracked per owner (uid): half the node.
inline constexpr std::size_t kMaxRanksPerOwner = 512;

struct RankCaps {
  std::size_t node = kMaxRanksPerNode;
  std::size_t per_owner = kMaxRanksPerOwner;
};

struct RankSelection {
  std::vector<RankView> kept;  ///< sorted by file name
  std::size_t dropped = 0;     ///< distinct ranks left out by the caps
  std::set<uid_t> owners_dropped;  ///< the owners of those ranks
};

/// @brief Keeps one rank per (owner, training job, rank) — the file in the owner's per-user folder
/// over one at the shared top level, then the most recently updated (a restarted rank's old file
/// is not yet stale) — then applies the caps: ranks in per-user folders are granted room first,
/// the top level's after them; within each, the room left is shared max-min fairly between owners
/// (an owner who needs less than an equal share keeps all of theirs, the others split the rest),
/// each owner's most recently updated ranks first. Two owners never shadow each other's ranks:
/// their series differ by the `uid` label.
RankSelection select_ranks(std::vector<RankView> ranks, const RankCaps& caps = {});

}  // namespace fragscope::agent

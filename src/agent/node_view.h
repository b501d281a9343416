#pragma once
/// @file node_view.h
/// @brief Everything the agent knows about its node at one poll: immutable once built, shared
/// between the poll loop (rules, actions) and the HTTP threads (/metrics).

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

#include "agent/nvml.h"
#include "agent/rank_file_reader.h"

namespace fragscope::agent {

/// @brief A live rank: its record plus the GPU index it was matched to.
struct RankView {
  RankRecord record;
  std::int32_t gpu = -1;  ///< NVML index when the UUID matched a GPU, else the hook's index
  std::string file_name;  ///< the reading's name: "rank0-pid1.fsr" or "1000/rank0-pid1.fsr"
  uid_t owner_uid = 0;    ///< the rank file's owner, who gets the checkpoint requests
  gid_t owner_gid = 0;
  bool in_user_folder = false;  ///< RankFileReading::in_user_folder
};

/// @brief One poll of the node.
struct NodeView {
  std::uint64_t unix_ns = 0;
  NvmlSample nvml;
  std::vector<RankView> ranks;  ///< the tracked ranks (rank_selection.h) of the kOk readings, sorted by file name
  std::array<std::size_t, 5> files_by_state{};  ///< indexed by RankFileState
  std::size_t ranks_dropped = 0;  ///< live ranks over the caps, not tracked (RankSelection::dropped)
  std::set<uid_t> owners_dropped;  ///< their owners
  std::size_t rank_files_unread = 0;  ///< RankScan::files_unread
  double scan_seconds = 0;  ///< time the poll took to read the rank files and NVML

  /// @brief The NVML sample of GPU `index`, or nullptr.
  const GpuSample* gpu(std::int32_t index) const;
};

/// @brief Builds a NodeView from one directory scan and one NVML sample: drops every reading
/// but kOk, counts the states, labels each rank with its GPU (UUID match first) and keeps the
/// ranks select_ranks() keeps.
NodeView make_node_view(std::uint64_t unix_ns, std::vector<RankFileReading> readings, NvmlSample nvml);

}  // namespace fragscope::agent

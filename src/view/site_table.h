#pragma once
/// @file site_table.h
/// @brief The code each allocation is charged to: its innermost frame outside PyTorch and
/// Python's own modules, as `fragscope analyze` attributes live blocks
/// (metrics/allocation_sites.h), worked out once per stack.
/// Thread-safety: immutable after construction.

#include <cstdint>
#include <string>
#include <vector>

#include "snapshot/snapshot.h"
#include "view/allocation_table.h"

namespace fragscope::view {

using SiteId = std::uint32_t;
inline constexpr SiteId kNoStackSite = 0;  ///< "(no stack recorded)"

class SiteTable {
 public:
  SiteTable(const snapshot::Snapshot& snapshot, const AllocationTable& allocations);

  SiteId site_of(const Allocation& allocation) const { return stack_sites_[allocation.stack]; }
  /// @brief "file.py:123 in name", or "(no stack recorded)".
  const std::string& label(SiteId site) const { return labels_[site]; }
  std::size_t size() const { return labels_.size(); }

 private:
  std::vector<SiteId> stack_sites_;  ///< by StackId
  std::vector<std::string> labels_;  ///< by SiteId
};

}  // namespace fragscope::view

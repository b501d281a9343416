#pragma once
/// @file allocation_sites.h
/// @brief Live bytes grouped by the code that allocated them (from block frames).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "snapshot/snapshot.h"

namespace fragscope::metrics {

struct AllocationSite {
  std::string location;  ///< "file.py:123 in name" of the attributed frame, or "(no stack recorded)"
  std::uint64_t bytes = 0;   ///< Σ size of live (active_allocated) blocks
  std::uint64_t blocks = 0;
};

/// @brief True for frames of PyTorch itself (installed or a source tree) and Python's standard
/// library: they say how memory was allocated, not which model code asked for it.
bool is_framework_file(std::string_view file);

/// @brief The `limit` sites holding the most live bytes, largest first.
///
/// A block is attributed to its innermost frame outside PyTorch's and Python's own modules
/// (`torch/`, `site-packages/torch`, `<frozen`), so `linear.py:134 forward` becomes the
/// model line that called it; when every frame is internal, the innermost one is used.
std::vector<AllocationSite> top_allocation_sites(const snapshot::Snapshot& snapshot, int device,
                                                 std::size_t limit);

}  // namespace fragscope::metrics

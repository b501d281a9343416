#include "view/site_table.h"

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include "metrics/allocation_sites.h"

namespace fragscope::view {

SiteTable::SiteTable(const snapshot::Snapshot& snapshot, const AllocationTable& allocations) {
  const snapshot::StackTable& stacks = snapshot.stacks;
  std::vector<std::int8_t> framework(stacks.frame_count(), -1);  // per frame: unknown, no, yes
  const auto is_framework = [&](snapshot::FrameId frame) {
    if (framework[frame] < 0) {
      framework[frame] = metrics::is_framework_file(snapshot.strings.view(stacks.frame(frame).filename)) ? 1 : 0;
    }
    return framework[frame] == 1;
  };
  labels_.push_back("(no stack recorded)");
  absl::flat_hash_map<snapshot::FrameId, SiteId> frame_sites;
  constexpr SiteId kUnset = ~SiteId{0};
  stack_sites_.assign(stacks.stack_count(), kUnset);
  stack_sites_[0] = kNoStackSite;
  for (const Allocation& allocation : allocations.allocations()) {
    SiteId& site = stack_sites_[allocation.stack];
    if (site != kUnset) continue;
    const auto frames = stacks.stack(allocation.stack);
    if (frames.empty()) {
      site = kNoStackSite;
      continue;
    }
    snapshot::FrameId chosen = frames.front();
    for (const snapshot::FrameId frame : frames) {
      if (!is_framework(frame)) {
        chosen = frame;
        break;
      }
    }
    const auto [it, inserted] = frame_sites.try_emplace(chosen, static_cast<SiteId>(labels_.size()));
    if (inserted) {
      const snapshot::Frame& frame = stacks.frame(chosen);
      labels_.push_back(fmt::format("{}:{} in {}", snapshot.strings.view(frame.filename), frame.line_text(),
                                    snapshot.strings.view(frame.name)));
    }
    site = it->second;
  }
}

}  // namespace fragscope::view

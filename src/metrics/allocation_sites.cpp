#include "metrics/allocation_sites.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "util/shown_text.h"

namespace fragscope::metrics {

bool is_framework_file(std::string_view file) {
  constexpr std::string_view kMarkers[] = {"site-packages/torch/", "dist-packages/torch/",
                                           "/torch/nn/", "/torch/autograd/", "/torch/utils/",
                                           "/torch/optim/", "/torch/_", "<frozen"};
  for (const auto marker : kMarkers)
    if (file.find(marker) != std::string_view::npos) return true;
  return file.find("/lib/python3") != std::string_view::npos &&
         file.find("-packages/") == std::string_view::npos;
}

std::vector<AllocationSite> top_allocation_sites(const snapshot::Snapshot& snapshot, int device,
                                                 std::size_t limit) {
  constexpr snapshot::FrameId kNoFrame = ~snapshot::FrameId{0};
  std::unordered_map<snapshot::StackId, snapshot::FrameId> frame_of_stack;
  std::unordered_map<snapshot::FrameId, AllocationSite> sites;
  for (const auto& segment : snapshot.segments) {
    if (segment.device != device) continue;
    for (const auto& block : snapshot.blocks_of(segment)) {
      if (block.state != snapshot::BlockState::kActiveAllocated) continue;
      auto [it, inserted] = frame_of_stack.try_emplace(block.stack, kNoFrame);
      if (inserted && block.stack != 0) {
        const auto frames = snapshot.stacks.stack(block.stack);
        it->second = frames.front();
        for (const auto id : frames) {
          if (!is_framework_file(snapshot.strings.view(snapshot.stacks.frame(id).filename))) {
            it->second = id;
            break;
          }
        }
      }
      AllocationSite& site = sites[it->second];
      site.bytes += block.size;
      ++site.blocks;
    }
  }
  std::vector<AllocationSite> result;
  for (auto& [frame_id, site] : sites) {
    if (frame_id == kNoFrame) {
      site.location = "(no stack recorded)";
    } else {
      const auto& frame = snapshot.stacks.frame(frame_id);
      site.location = fmt::format("{}:{} in {}", shown_name(snapshot.strings.view(frame.filename)),
                                  frame.line_text(), shown_name(snapshot.strings.view(frame.name)));
    }
    result.push_back(std::move(site));
  }
  std::sort(result.begin(), result.end(), [](const auto& a, const auto& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.location < b.location;
  });
  if (result.size() > limit) result.resize(limit);
  return result;
}

}  // namespace fragscope::metrics

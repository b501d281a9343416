#include "replay/release_origin.h"

#include <string_view>

namespace fragscope::replay {

ReleaseOrigin ReleaseOriginClassifier::classify(snapshot::StackId stack) {
  if (stack == 0) return ReleaseOrigin::kUnknown;
  if (stack >= cache_.size()) cache_.resize(stack + 1, 0);
  if (cache_[stack] == 0) cache_[stack] = static_cast<std::uint8_t>(from_frames(stack)) + 1;
  return static_cast<ReleaseOrigin>(cache_[stack] - 1);
}

ReleaseOrigin ReleaseOriginClassifier::from_frames(snapshot::StackId stack) const {
  for (const snapshot::FrameId id : snapshot_.stacks.stack(stack)) {  // innermost first
    const snapshot::Frame& frame = snapshot_.stacks.frame(id);
    const std::string_view name = snapshot_.strings.view(frame.name);
    if (name.find("CachingAllocator::malloc(") != std::string_view::npos) return ReleaseOrigin::kMalloc;
    if (name.find("emptyCache(") != std::string_view::npos) return ReleaseOrigin::kFlush;
    if (name == "empty_cache" && snapshot_.strings.view(frame.filename).ends_with("torch/cuda/memory.py")) {
      return ReleaseOrigin::kFlush;
    }
  }
  return ReleaseOrigin::kUnknown;
}

}  // namespace fragscope::replay

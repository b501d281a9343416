#pragma once
/// @file release_origin.h
/// @brief Why the allocator gave a segment back (a trace's `segment_free` / `segment_unmap`), as
/// far as the event's stack tells.
///
/// PyTorch releases cached segments in two places: inside a malloc (garbage collection, or a
/// cudaMalloc that failed and freed the cache to retry) and in emptyCache(), which a user's
/// `torch.cuda.empty_cache()`, Lightning, HF Trainer's `torch_empty_cache_steps` and cuDNN's
/// benchmark (before and after its algorithm search) call. The two release the same segments,
/// so only the stack tells them apart: by default (`stacks="all"`) a release event's innermost
/// allocator frame is `DeviceCachingAllocator::malloc` or `NativeCachingAllocator::emptyCache`;
/// with Python stacks only, a user's flush shows `empty_cache` in torch/cuda/memory.py. The
/// innermost of those frames decides.
/// Thread-safety: a classifier caches per stack; use one per thread.

#include <cstdint>
#include <vector>

#include "snapshot/snapshot.h"

namespace fragscope::replay {

enum class ReleaseOrigin : std::uint8_t {
  kUnknown,  ///< no frame that tells (no stack, or Python frames of a cuDNN call)
  kFlush,    ///< emptyCache(): outside any malloc
  kMalloc,   ///< inside a malloc (GC, or the release after a failed cudaMalloc)
};

class ReleaseOriginClassifier {
 public:
  explicit ReleaseOriginClassifier(const snapshot::Snapshot& snapshot) : snapshot_(snapshot) {}
  /// @brief The origin of a release event with stack `stack`.
  ReleaseOrigin classify(snapshot::StackId stack);

 private:
  ReleaseOrigin from_frames(snapshot::StackId stack) const;
  const snapshot::Snapshot& snapshot_;
  std::vector<std::uint8_t> cache_;  // per stack: 0 = not yet classified, else origin + 1
};

}  // namespace fragscope::replay

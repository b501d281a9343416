#pragma once
/// @file whatif_overlay.h
/// @brief The same trace replayed under another PYTORCH_CUDA_ALLOC_CONF, or through the ideal
/// packer, on a thread of its own, to draw over the recorded curves: where the reserved bytes
/// would have gone, and where that allocator would have run out of memory.
///
/// Each replay runs at the capacity the trace proves (replay/capacity.h: the OOM's free bytes,
/// failed cudaMallocs; unlimited without evidence), keeping 65,536 points of its reserved and
/// allocated bytes (each the maximum over its stretch of events). The trace is compiled once,
/// on the first request. Requests are answered at once: pending until the replay ends.
/// At most kMaxCurves curves are kept; a request past that is refused.
/// Thread-safety: request() from any thread; the snapshot must outlive the overlay.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "replay/replay_engine.h"
#include "snapshot/snapshot.h"

namespace fragscope::view {

struct WhatIfCurve {
  enum class State { kPending, kDone, kFailed };
  std::string name;  ///< "ideal", or the config's normalised spelling ("" = PyTorch's defaults)
  State state = State::kPending;
  std::string error;  ///< for kFailed
  std::vector<replay::TimelinePoint> points;
  std::optional<std::uint64_t> capacity_bytes;  ///< the capacity replayed at (nullopt: unlimited)
  std::optional<std::uint32_t> oom_event;       ///< where this allocator runs out of memory
  bool completed = false;                       ///< replayed to the end of the trace
  std::uint64_t peak_reserved_bytes = 0;
};

class WhatIfOverlay {
 public:
  static constexpr std::size_t kMaxCurves = 16;
  static constexpr std::size_t kPoints = 65536;

  WhatIfOverlay(const snapshot::Snapshot& snapshot, int device, std::string source);
  ~WhatIfOverlay();
  WhatIfOverlay(const WhatIfOverlay&) = delete;
  WhatIfOverlay& operator=(const WhatIfOverlay&) = delete;

  /// @brief The curve of "ideal" or of a PYTORCH_CUDA_ALLOC_CONF value, queued when new.
  /// @throws InputError when PyTorch would reject the config, or kMaxCurves are kept already.
  std::shared_ptr<const WhatIfCurve> request(const std::string& name);

 private:
  void work();

  const snapshot::Snapshot& snapshot_;
  int device_;
  std::string source_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<std::string, std::shared_ptr<const WhatIfCurve>> curves_;
  std::deque<std::string> queue_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace fragscope::view

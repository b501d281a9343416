#include "view/whatif_overlay.h"

#include <exception>

#include <fmt/format.h>

#include "alloc/alloc_config.h"
#include "replay/capacity.h"
#include "replay/prepared_trace.h"
#include "util/error.h"

namespace fragscope::view {

WhatIfOverlay::WhatIfOverlay(const snapshot::Snapshot& snapshot, int device, std::string source)
    : snapshot_(snapshot), device_(device), source_(std::move(source)) {}

WhatIfOverlay::~WhatIfOverlay() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::shared_ptr<const WhatIfCurve> WhatIfOverlay::request(const std::string& name) {
  const std::string key = name == "ideal" ? name : alloc::to_alloc_conf(alloc::parse_alloc_conf(name));
  std::lock_guard lock(mutex_);
  if (const auto it = curves_.find(key); it != curves_.end()) return it->second;
  if (curves_.size() >= kMaxCurves) {
    throw InputError(fmt::format("{} what-if curves are kept already; restart the view for others", kMaxCurves));
  }
  auto pending = std::make_shared<WhatIfCurve>();
  pending->name = key;
  curves_[key] = pending;
  queue_.push_back(key);
  if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
  wake_.notify_one();
  return pending;
}

void WhatIfOverlay::work() {
  std::optional<replay::PreparedTrace> trace;
  std::optional<replay::Capacity> capacity;
  std::string prepare_error;
  for (;;) {
    std::string key;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      key = queue_.front();
      queue_.pop_front();
    }
    auto curve = std::make_shared<WhatIfCurve>();
    curve->name = key;
    try {
      if (!trace && prepare_error.empty()) {
        try {
          trace = replay::prepare_trace(snapshot_, device_, source_);
          capacity = replay::resolve_capacity(*trace, {});
        } catch (const std::exception& e) {
          prepare_error = e.what();
        }
      }
      if (!trace) throw std::runtime_error(prepare_error);
      replay::ReplayOptions options = replay::replay_options_for(*capacity);
      options.timeline_points = kPoints;
      const bool ideal = key == "ideal";
      const replay::ReplayResult result =
          replay::run_replay(*trace, ideal ? replay::ModelKind::kIdeal : replay::ModelKind::kCaching,
                             ideal ? trace->recorded_config : alloc::parse_alloc_conf(key), options);
      curve->points = result.timeline;
      curve->capacity_bytes = capacity->effective_bytes();
      if (result.oom) curve->oom_event = result.oom_trace_index;
      curve->completed = result.completed;
      curve->peak_reserved_bytes = result.stats.peak_reserved_bytes;
      curve->state = WhatIfCurve::State::kDone;
    } catch (const std::exception& e) {
      curve->state = WhatIfCurve::State::kFailed;
      curve->error = e.what();
    }
    std::lock_guard lock(mutex_);
    curves_[key] = std::move(curve);
  }
}

}  // namespace fragscope::view

#include "util/progress.h"

#include <algorithm>

namespace fragscope {

ProgressCounter::ProgressCounter(const Progress& progress, std::string task, std::string_view unit,
                                 std::uint64_t total)
    : progress_(progress), task_(std::move(task)), unit_(unit), total_(total) {
  if (progress_) progress_({task_, unit_, 0, total_});
}

void ProgressCounter::add(std::uint64_t units) {
  if (!progress_ || units == 0) return;
  const std::uint64_t done = done_.fetch_add(units, std::memory_order_relaxed) + units;
  progress_({task_, unit_, std::min(done, total_), total_});
}

}  // namespace fragscope

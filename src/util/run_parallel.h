#pragma once
/// @file run_parallel.h
/// @brief Runs independent tasks on a small pool of threads.

#include <functional>
#include <vector>

namespace fragscope {

/// @brief Runs every task once on `threads` threads (the calling thread is one of them) and
/// returns when all have finished. Tasks are taken in order; each must be safe to run
/// concurrently with the others.
/// @throws the first exception a task threw, in time; the other tasks still run to the end, so
///         their side effects are complete when the exception arrives.
/// REQUIRES: threads >= 1.
void run_parallel(const std::vector<std::function<void()>>& tasks, unsigned threads);

}  // namespace fragscope

#pragma once
/// @file progress.h
/// @brief How a long operation says how far it is. The libraries only count; the caller decides
/// what to show (the CLI draws a bar on a terminal, nothing on a pipe), so nothing below the CLI
/// prints.
///
/// A task is one phase of the work ("reading rank0.pickle", "what-if: 15 configs"), counted in
/// one unit from 0 to a total known when it starts. Its last report has done == total.

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace fragscope {

/// @brief One report: `done` of `total` `unit`s of `task` are finished.
struct ProgressTick {
  std::string_view task;  ///< what is being done, for a person
  std::string_view unit;  ///< what done and total count: "bytes" (shown as a size) or "events"
  std::uint64_t done = 0;
  std::uint64_t total = 0;
};

/// @brief Receives the reports. It may be called from several threads at once (a parallel
/// sweep), every few milliseconds per thread: it must be thread-safe and quick. Empty: no one
/// listens.
using Progress = std::function<void(const ProgressTick&)>;

/// @brief The count of one task, shared by the threads that do it: each adds the units it
/// finished and the sum goes to the Progress. A task whose work turns out smaller than its
/// total (a replay that stops at an OOM) adds the units it skipped, so that it still ends at
/// done == total.
/// Thread-safety: add() from any thread; the object must outlive them.
class ProgressCounter {
 public:
  /// @param progress may be empty: then add() does nothing.
  ProgressCounter(const Progress& progress, std::string task, std::string_view unit, std::uint64_t total);
  ProgressCounter(const ProgressCounter&) = delete;
  ProgressCounter& operator=(const ProgressCounter&) = delete;

  void add(std::uint64_t units);

 private:
  const Progress& progress_;
  std::string task_;
  std::string_view unit_;
  std::uint64_t total_;
  std::atomic<std::uint64_t> done_{0};
};

}  // namespace fragscope

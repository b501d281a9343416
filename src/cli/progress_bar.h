#pragma once
/// @file progress_bar.h
/// @brief Shows the libraries' progress reports (util/progress.h) as one line on stderr: what is
/// being done, a bar, the share done of how much, and the time left.
///
/// Drawn only when stderr is a terminal and the user did not ask for --quiet, so pipes, files
/// and CI logs see nothing. A task appears once it has run for a tenth of a second (quick work
/// draws nothing), is redrawn at most ten times a second, and its line is erased when the task
/// reaches its total and when the bar is destroyed: the terminal is clean before the report is
/// printed or an error is. Thread-safety: the Progress may be called from many threads at once.

#include <chrono>
#include <mutex>
#include <string>

#include "util/progress.h"

namespace fragscope::cli {

class ProgressBar {
 public:
  /// @param wanted false for --quiet; true draws when stderr is a terminal.
  explicit ProgressBar(bool wanted);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// @brief What to give the libraries; empty when nothing will be drawn, so that they count
  /// nothing. Valid while the bar lives.
  const Progress& progress() const { return progress_; }

  /// @brief Erases the line and draws nothing more: call before printing the report.
  void close();

 private:
  using Clock = std::chrono::steady_clock;

  void report(const ProgressTick& tick);
  void draw(const ProgressTick& tick, Clock::time_point now);
  void erase();

  std::mutex mutex_;
  Progress progress_;
  std::string task_;         ///< the task being shown
  std::uint64_t done_ = 0;   ///< the most of it reported (a report from another thread may come late)
  bool task_ended_ = false;  ///< it reached its total
  Clock::time_point task_start_{};
  Clock::time_point last_draw_{};
  bool drawn_ = false;       ///< a line is on the terminal
  bool closed_ = false;
};

}  // namespace fragscope::cli

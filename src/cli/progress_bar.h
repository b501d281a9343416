#pragma once
/// @file progress_bar.h
/// @brief A one-line progress bar on stderr for reads that take noticeable time.
///
/// Drawn only when stderr is a terminal and the input is large (so pipes, CI logs and small
/// files see nothing); erased when done. Thread-safety: call from one thread.

#include <chrono>
#include <cstdint>
#include <string>

namespace fragscope::cli {

class ProgressBar {
 public:
  /// @param label what is being read (the file name).
  /// @param total_bytes input size; bars are drawn only from `min_bytes` up.
  ProgressBar(std::string label, std::uint64_t total_bytes, std::uint64_t min_bytes = 16u << 20);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// @brief Redraws at most ten times a second.
  void update(std::uint64_t done, std::uint64_t total);

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace fragscope::cli

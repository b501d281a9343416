#pragma once
/// @file rank_simulator.h
/// @brief `fragscope agent --simulate`: recorded runs replayed as live ranks, so the agent, its
/// metrics, the Prometheus rules and the actions can be tried without a GPU or torch.
///
/// Each recorded run (a folder with `steps.jsonl`, the hook's telemetry schema, e.g. the
/// fixtures recorded on the H200) becomes one rank of its own training job, named after the
/// folder, on its own GPU index. Its rank file is written with the real layout and update
/// protocol (RankFileWriter) at the recorded pace, refreshed every second like the hook's
/// heartbeat, and its checkpoint requests are acknowledged at the next step, as a training loop
/// that checkpoints on request would. What it leaves out: NVML (the GPU series come from
/// whatever NVML the agent loads), allocator state between steps, and a real process (the
/// record's pid is the simulating process).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/rank_file_writer.h"
#include "agent/rank_record.h"

namespace fragscope::agent {

/// @brief One line of `steps.jsonl`: what the hook saw at the end of a (micro-)step.
struct RecordedStep {
  double end_seconds = 0;  ///< `t`: since the run started
  double data_wait_seconds = 0;
  double compute_seconds = 0;
  double h2d_seconds = 0;
  std::uint64_t samples = 0;  ///< `mbs`
  std::uint64_t tokens = 0;   ///< `tokens`, else mbs × seq_len
  std::uint64_t longest_sequence = 0;
  JobPhase phase = JobPhase::kTrain;
  std::uint64_t allocated_bytes = 0, reserved_bytes = 0, active_bytes = 0, inactive_split_bytes = 0,
                requested_bytes = 0, allocated_peak_bytes = 0, reserved_peak_bytes = 0, alloc_retries = 0,
                ooms = 0, segments = 0;
};

/// @brief A recorded run: its name (the training_job label), its steps, the card's size.
struct RecordedRun {
  std::string name;
  std::vector<RecordedStep> steps;
  std::uint64_t device_total_bytes = 0;  ///< from `smi.csv` beside it; 0 unknown
};

/// @brief At most this many steps per run: the whole run is kept in memory.
inline constexpr std::size_t kMaxRecordedSteps = 1'000'000;

/// @brief Reads `<path>/steps.jsonl` (or `path` itself when it is a file) and `smi.csv` beside it.
/// @throws InputError naming the file and the line: missing, not a regular file, empty, bad
/// JSON, a missing or negative field, time going backwards, more than kMaxRecordedSteps steps.
RecordedRun load_recorded_run(const std::filesystem::path& path);

/// @brief Replays runs into `rank_dir` on its own thread until destroyed; the destructor stops
/// the thread and removes the rank files. Runs loop: each pass continues the counters (steps,
/// retries, OOMs, samples, tokens) where the last one ended, as one long job would.
class RankSimulator {
 public:
  /// @param speed recorded seconds per wall second (2: twice as fast).
  /// @throws InputError when a rank file cannot be created in `rank_dir`.
  RankSimulator(std::vector<RecordedRun> runs, const std::filesystem::path& rank_dir, double speed);
  ~RankSimulator();
  RankSimulator(const RankSimulator&) = delete;
  RankSimulator& operator=(const RankSimulator&) = delete;

  /// @brief The rank file of each run, in the order given.
  std::vector<std::filesystem::path> rank_files() const;

 private:
  struct SimulatedRank;
  void loop();

  std::vector<std::unique_ptr<SimulatedRank>> ranks_;
  double speed_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace fragscope::agent

// Times the snapshot reader alone (no metrics, no report) on one file:
//   read_snapshot_bench FILE [REPEATS]
// Prints the best wall time of REPEATS reads and what was read, for docs/PERFORMANCE.md.
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "snapshot/snapshot_reader.h"
#include "util/error.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: read_snapshot_bench FILE [REPEATS]\n");
    return 2;
  }
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 1;
  double best = 1e9;
  std::size_t events = 0, segments = 0;
  try {
    for (int i = 0; i < repeats; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const auto snapshot = fragscope::snapshot::read_snapshot_file(argv[1]);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      best = std::min(best, seconds);
      events = 0;
      for (const auto& trace : snapshot.device_traces) events += trace.size();
      segments = snapshot.segments.size();
    }
  } catch (const fragscope::InputError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }
  fmt::print("{}: best of {}: {:.3f} s; {} segments, {} trace events ({:.1f} M events/s)\n", argv[1],
             repeats, best, segments, events, events / best / 1e6);
  return 0;
}

// One agent poll over 8 GPUs x 64 ranks: reading the rank files, and rendering /metrics.
// The rank files are written once by the hook's real writer (python/fragscope/shm.py).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include <benchmark/benchmark.h>
#include <prometheus/text_serializer.h>

#include "agent/node_metrics.h"
#include "agent/node_view.h"
#include "agent/rank_file_reader.h"

namespace {

constexpr int kGpus = 8;
constexpr int kRanksPerGpu = 64;

std::uint64_t unix_ns_now() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

/// Removes the benchmark's temp dir at exit.
struct TempDir {
  std::filesystem::path path;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

/// 512 rank files in a temp dir, written once for all benchmarks.
const std::filesystem::path& rank_dir() {
  static const TempDir dir{[] {
    std::string pattern = (std::filesystem::temp_directory_path() / "fragscope-bench-XXXXXX").string();
    std::filesystem::path path = ::mkdtemp(pattern.data());
    const std::string command =
        std::string(FRAGSCOPE_PYTHON) + " -c \"import sys, time; sys.path.insert(0, '" + FRAGSCOPE_SOURCE_DIR +
        "/python'); from fragscope import shm\n" + "for i in range(" + std::to_string(kGpus * kRanksPerGpu) + "):\n" +
        "    shm.RankFileWriter('" + path.string() + "', shm.RankRecord(pid=10000 + i, rank=i, gpu=i // " +
        std::to_string(kRanksPerGpu) + ", job='bench', update_unix_ns=time.time_ns() + 10**15, " +
        "reserved_bytes=52865007616, allocated_bytes=7692999168, inactive_split_bytes=2396399104, " +
        "step=i, data_wait_ratio=0.01, step_seconds=0.36))\"";
    if (std::system(command.c_str()) != 0) std::abort();
    return path;
  }()};
  return dir.path;
}

fragscope::agent::NodeView node_view() {
  fragscope::agent::NvmlSample nvml;
  nvml.up = true;
  for (int g = 0; g < kGpus; ++g) {
    fragscope::agent::GpuSample gpu;
    gpu.index = static_cast<std::uint32_t>(g);
    gpu.used_bytes = 140'000'000'000;
    gpu.total_bytes = 150'754'820'096;
    gpu.utilization_ratio = 0.9;
    gpu.processes.push_back({static_cast<std::uint32_t>(10000 + g), 60'000'000'000});
    nvml.gpus.push_back(gpu);
  }
  return fragscope::agent::make_node_view(unix_ns_now(),
                                          fragscope::agent::scan_rank_directory(rank_dir(), unix_ns_now(),
                                                                                std::chrono::seconds(60))
                                              .readings,
                                          nvml);
}

void BM_ScanRankDirectory(benchmark::State& state) {
  const auto& dir = rank_dir();
  for (auto _ : state) {
    auto readings = fragscope::agent::scan_rank_directory(dir, unix_ns_now(), std::chrono::seconds(60)).readings;
    if (readings.size() != kGpus * kRanksPerGpu || readings.back().state != fragscope::agent::RankFileState::kOk) {
      state.SkipWithError("rank files unreadable");
    }
    benchmark::DoNotOptimize(readings);
  }
  state.counters["ranks"] = kGpus * kRanksPerGpu;
}
BENCHMARK(BM_ScanRankDirectory)->Unit(benchmark::kMillisecond);

void BM_RenderMetrics(benchmark::State& state) {
  const auto view = node_view();
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, fragscope::agent::node_metric_families(view, {}));
    bytes = out.str().size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["body_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderMetrics)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

// Replay throughput on recorded traces, and the free-block index against a reference.
//
//   build-*/bench/replay/replay_bench [--benchmark_filter=...]
//
// BM_Replay/<fixture>      the replay loop (trace compiled once, as whatif does): one core
// BM_Prepare/<fixture>     compiling the trace (once per snapshot)
// BM_WhatIf/<threads>      the standard sweep on fid_default on 1, 2, 4, 8 and 16 threads
// BM_FreeSet/<impl>        the best-fit index alone on the operation stream of fid_default's
//                          replay: FreeBlockSet vs std::set<(size, address)> (what PyTorch uses)
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <benchmark/benchmark.h>

#include "alloc/free_block_set.h"
#include "replay/capacity.h"
#include "replay/prepared_trace.h"
#include "replay/replay_engine.h"
#include "replay/whatif.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::replay {
namespace {

/// The fixtures: $FRAGSCOPE_FIXTURES_DIR when set (another machine), else the build's.
std::string fixtures_dir() {
  const char* dir = std::getenv("FRAGSCOPE_FIXTURES_DIR");
  return dir ? dir : FRAGSCOPE_FIXTURES_DIR;
}

/// Snapshots are read once per process and kept.
const snapshot::Snapshot& fixture(const std::string& name) {
  static std::map<std::string, std::unique_ptr<snapshot::Snapshot>> cache;
  auto& slot = cache[name];
  if (!slot) {
    slot = std::make_unique<snapshot::Snapshot>(
        snapshot::read_snapshot_file(fixtures_dir() + "/" + name + "/snapshot.pickle.zst"));
  }
  return *slot;
}

const PreparedTrace& prepared(const std::string& name) {
  static std::map<std::string, std::unique_ptr<PreparedTrace>> cache;
  auto& slot = cache[name];
  if (!slot) slot = std::make_unique<PreparedTrace>(prepare_trace(fixture(name), 0, name));
  return *slot;
}

void BM_Replay(benchmark::State& state, const std::string& name) {
  const PreparedTrace& trace = prepared(name);
  ReplayOptions options = replay_options_for(resolve_capacity(trace, {}));
  options.timeline_points = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(run_replay(trace, ModelKind::kCaching, trace.recorded_config, options));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * trace.trace_events));
  state.counters["events"] = static_cast<double>(trace.trace_events);
}

void BM_Prepare(benchmark::State& state, const std::string& name) {
  const snapshot::Snapshot& snap = fixture(name);
  for (auto _ : state) benchmark::DoNotOptimize(prepare_trace(snap, 0, name));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * snap.device_traces[0].size()));
}

void BM_WhatIf(benchmark::State& state) {
  const PreparedTrace& trace = prepared("fid_default");
  const auto sweep = standard_sweep(trace, false);
  WhatIfOptions options;
  options.threads = static_cast<unsigned>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(run_whatif(trace, sweep, {}, options));
  // Each config is replayed once without a limit, plus the ideal packer.
  state.SetItemsProcessed(
      static_cast<std::int64_t>(state.iterations() * (sweep.size() + 1) * trace.trace_events));
}

/// The free-list operations a replay of fid_default performs, recorded through a std::set.
struct FreeOp {
  enum Kind : std::uint8_t { kInsert, kErase, kBestFit } kind;
  std::uint64_t size;
  std::uint64_t address;
};

std::vector<FreeOp> synthetic_free_ops() {
  // Sizes as a training step uses them: many equal activations, a few odd ones.
  std::vector<FreeOp> ops;
  std::set<std::pair<std::uint64_t, std::uint64_t>> live;
  std::uint64_t seed = 1;
  auto next = [&] { return seed = seed * 6364136223846793005ull + 1442695040888963407ull; };
  const std::uint64_t sizes[] = {44040192, 6291456, 8388608, 117440512, 23068672, 46137344,
                                 106954752, 146800640, 2097152, 524288};
  for (int i = 0; i < 300000; ++i) {
    const std::uint64_t r = next() >> 33;
    if (live.size() < 600 || r % 3 == 0) {
      const std::uint64_t size = sizes[r % std::size(sizes)] + (r % 7 == 0 ? (r % 64) * 512 : 0);
      const std::uint64_t address = (next() >> 30) << 9;
      if (live.insert({size, address}).second) ops.push_back({FreeOp::kInsert, size, address});
    } else if (r % 3 == 1) {
      auto it = live.lower_bound({sizes[r % std::size(sizes)], 0});
      if (it == live.end()) continue;
      ops.push_back({FreeOp::kBestFit, sizes[r % std::size(sizes)], 0});
      ops.push_back({FreeOp::kErase, it->first, it->second});
      live.erase(it);
    } else {
      auto it = live.lower_bound({sizes[(r / 3) % std::size(sizes)], next() << 9});
      if (it == live.end()) continue;
      ops.push_back({FreeOp::kErase, it->first, it->second});
      live.erase(it);
    }
  }
  return ops;
}

void BM_FreeSet_Reference(benchmark::State& state) {
  const std::vector<FreeOp> ops = synthetic_free_ops();
  for (auto _ : state) {
    std::set<std::tuple<std::uint64_t, std::uint64_t, std::uint32_t>> set;
    for (const FreeOp& op : ops) {
      if (op.kind == FreeOp::kInsert) set.insert({op.size, op.address, 0});
      else if (op.kind == FreeOp::kErase) set.erase({op.size, op.address, 0});
      else benchmark::DoNotOptimize(set.lower_bound({op.size, 0, 0}));
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * ops.size()));
}

void BM_FreeSet_Fragscope(benchmark::State& state) {
  const std::vector<FreeOp> ops = synthetic_free_ops();
  for (auto _ : state) {
    alloc::FreeBlockSet set;
    for (const FreeOp& op : ops) {
      if (op.kind == FreeOp::kInsert) set.insert(op.size, op.address, 0);
      else if (op.kind == FreeOp::kErase) set.erase(op.size, op.address);
      else benchmark::DoNotOptimize(set.lower_bound(op.size));
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * ops.size()));
}

}  // namespace
}  // namespace fragscope::replay

int main(int argc, char** argv) {
  using namespace fragscope::replay;
  for (const char* name : {"fid_default", "fid_expandable", "fid_msplit128", "fsdp_default",
                           "frag_oom_104", "ring_default", "big"}) {
    benchmark::RegisterBenchmark((std::string("BM_Replay/") + name).c_str(), BM_Replay, std::string(name))
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("BM_Prepare/") + name).c_str(), BM_Prepare, std::string(name))
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("BM_WhatIf", BM_WhatIf)
      ->Arg(1)
      ->Arg(2)
      ->Arg(4)
      ->Arg(8)
      ->Arg(16)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_FreeSet/reference_std_set", BM_FreeSet_Reference)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_FreeSet/fragscope", BM_FreeSet_Fragscope)->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// The replay on field recordings (tests/data/field): third-party training code on the H200,
// dumped as its users dump it. Under the recorded config and the capacity the trace itself
// implies, each replay must find every malloc's segment events as recorded, the run's
// max_memory_reserved and num_alloc_retries to the byte and count, and its OOM on the event
// the run died of.
#include <gtest/gtest.h>

#include <filesystem>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "alloc/alloc_config.h"
#include "replay/capacity.h"
#include "replay/prepared_trace.h"
#include "replay/replay_engine.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::replay {
namespace {

const std::string kField = std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/field/";

struct Recording {
  PreparedTrace trace;
  nlohmann::json truth;
};

Recording load(const std::string& name) {
  std::string snapshot_path;
  for (const auto& entry : std::filesystem::directory_iterator(kField + name)) {
    if (entry.path().filename().string().find(".pickle") != std::string::npos) snapshot_path = entry.path().string();
  }
  const snapshot::Snapshot snap = snapshot::read_snapshot_file(snapshot_path);
  std::ifstream truth(kField + name + "/truth.json");
  return {prepare_trace(snap, snapshot::busiest_device(snap), snapshot_path), nlohmann::json::parse(truth)};
}

void expect_exact(const std::string& name) {
  SCOPED_TRACE(name);
  const Recording r = load(name);
  ReplayOptions options = replay_options_for(resolve_capacity(r.trace, {}));
  options.self_check = true;
  const ReplayResult result = run_replay(r.trace, ModelKind::kCaching, r.trace.recorded_config, options);
  EXPECT_EQ(result.segment_mismatches, 0u) << "first at event " << result.first_mismatch_trace_index.value_or(0);
  EXPECT_EQ(result.stats.peak_reserved_bytes, r.truth["max_memory_reserved"].get<std::uint64_t>());
  EXPECT_EQ(result.stats.peak_reserved_bytes, r.trace.recorded_peak_reserved);
  EXPECT_EQ(result.stats.num_alloc_retries, r.truth["num_alloc_retries"].get<std::uint64_t>());
  EXPECT_EQ(result.stats.num_ooms, r.truth["num_ooms"].get<std::uint64_t>());
  EXPECT_TRUE(result.completed);
  if (r.truth["outcome"] == "oom") {
    ASSERT_TRUE(result.oom);
    ASSERT_FALSE(r.trace.ooms.empty());
    EXPECT_EQ(*result.oom_trace_index, r.trace.ooms.back().trace_index);
    EXPECT_TRUE(result.oom_matches_recorded);
  } else {
    EXPECT_FALSE(result.oom);
  }
}

TEST(FieldTest, PlainTrainingLoopsReplayExactly) {
  for (const char* name : {"acc_edge", "fsdp_edge", "hfc_lo", "hft_edge", "hft_lo"}) expect_exact(name);
}

TEST(FieldTest, SecondBatchReplaysExactly) {
  // torch.compile's default mode, the HF Trainer on GPT-NeoX from mid-run, a ring of 6,000
  // entries, DeepLabV3 at varying sizes, the nn.Transformer tutorial dumped by the OOM observer.
  for (const char* name : {"cmp_edge", "hfn_edge", "ring_edge", "seg_edge", "tut_edge", "tut_lo"}) expect_exact(name);
  EXPECT_TRUE(load("ring_edge").trace.starts_mid_run);
}

TEST(FieldTest, FsdpFromMidRunReplaysExactlyWithinItsTrace) {
  // History from step 3: the run retried once before the trace began (num_alloc_retries 5, 4 in
  // the trace); within the trace every segment event, the peak and the OOM are as recorded.
  const Recording r = load("fs2_edge");
  ReplayOptions options = replay_options_for(resolve_capacity(r.trace, {}));
  options.self_check = true;
  const ReplayResult result = run_replay(r.trace, ModelKind::kCaching, r.trace.recorded_config, options);
  EXPECT_EQ(result.segment_mismatches, 0u);
  EXPECT_EQ(result.stats.peak_reserved_bytes, r.truth["max_memory_reserved"].get<std::uint64_t>());
  EXPECT_EQ(result.stats.num_alloc_retries, 4u);
  ASSERT_TRUE(result.oom);
  EXPECT_TRUE(result.oom_matches_recorded);
}

TEST(FieldTest, UserEmptyCacheCallsReplayAsFlushes) {
  // llama_loop.py calls torch.cuda.empty_cache() every 3 steps; Lightning flushes after the OOM.
  for (const char* name : {"ec_edge", "lit_edge"}) expect_exact(name);
  const Recording r = load("ec_edge");
  EXPECT_EQ(r.trace.flushes, 3u);
}

TEST(FieldTest, TheDriversRefusalsBoundTheCapacityBelowItsFreeFigure) {
  // ec_lo: cudaMemGetInfo at the OOM overstates by 1.13 MiB what an earlier cudaMalloc got.
  expect_exact("ec_lo");
}

TEST(FieldTest, CudnnBenchmarkFlushesReplayAsFlushes) {
  // cudnn.benchmark: emptyCache() around every algorithm search, often right before a cudaMalloc.
  for (const char* name : {"rn_edge", "rn_lo"}) expect_exact(name);
  const Recording r = load("rn_edge");
  EXPECT_GT(r.trace.flushes, 200u);
  EXPECT_EQ(r.trace.capacity.release_bursts, 2u);  // one failed cudaMalloc retried, and the OOM
}

TEST(FieldTest, ACudaGraphPoolReplaysAsAPoolOfItsOwn) {
  // torch.compile(mode="reduce-overhead"): cudagraph trees allocate on the capture stream from
  // the graph's private pool (segment_pool_id (0, 1)); empty_cache() at the end leaves it alone.
  expect_exact("cro_cal");
  const Recording r = load("cro_cal");
  ASSERT_EQ(r.trace.mem_pools.size(), 2u);
  EXPECT_EQ(r.trace.mem_pools[1], (std::pair<std::int64_t, std::int64_t>{0, 1}));
  std::size_t in_graph_pool = 0;
  for (const Op& op : r.trace.ops) in_graph_pool += op.kind == OpKind::kAlloc && op.pool == 1;
  EXPECT_EQ(in_graph_pool, 1263u);
}

// FSDP2 with history from step 4: the run died at 34.18 GiB; rerun under expandable segments at
// the same budget it completed (docs/VALIDATION.md, field). Replayed from the trace's recorded
// segments every setting failed at the OOM; expandable segments start from the live blocks
// re-laid as they hold them, and pass it.
TEST(FieldTest, ExpandableSegmentsStartAMidRunTraceFromItsLiveBlocksReLaid) {
  const Recording r = load("fsdp_edge");
  ASSERT_TRUE(r.trace.starts_mid_run);
  const alloc::AllocConfig expandable = alloc::parse_alloc_conf("expandable_segments:True");
  EXPECT_TRUE(relays_initial_state(r.trace, expandable));
  EXPECT_FALSE(relays_initial_state(r.trace, r.trace.recorded_config));
  const ReplayResult result =
      run_replay(r.trace, ModelKind::kCaching, expandable, replay_options_for(resolve_capacity(r.trace, {})));
  EXPECT_TRUE(result.passed_recorded_oom);
  EXPECT_FALSE(result.oom);
}

/// The least capacity (a multiple of `capacity`, to `precision`) at which `trace` replays past its OOM.
double least_capacity(const PreparedTrace& trace, const alloc::AllocConfig& config, std::uint64_t capacity,
                      double precision = 1e-4) {
  const auto passes = [&](double factor) {
    ReplayOptions options;
    options.capacity = static_cast<std::uint64_t>(static_cast<double>(capacity) * factor);
    options.timeline_points = 0;
    const ReplayResult result = run_replay(trace, ModelKind::kCaching, config, options);
    return result.passed_recorded_oom || !result.oom;
  };
  double low = 0.7, high = 1.5;
  while (high - low > precision) ((passes((low + high) / 2)) ? high : low) = (low + high) / 2;
  return high;
}

// ec_edge's trace is complete; cut at 20%, 50% and 80% it starts mid-run. Expandable segments
// from the cut trace's re-laid start need what they need from the job's start (measured on 20
// recordings: −0.98% to +2.97% of the capacity, docs/replay.md).
TEST(FieldTest, AReLaidStartNeedsWhatTheJobsStartNeeds) {
  const std::string path = kField + "ec_edge/oom_snapshot.pickle.zst";
  const snapshot::Snapshot whole = snapshot::read_snapshot_file(path);
  const PreparedTrace full = prepare_trace(whole, 0, path);
  ASSERT_FALSE(full.starts_mid_run);
  const std::uint64_t capacity = *resolve_capacity(full, {}).effective_bytes();
  const alloc::AllocConfig expandable = alloc::parse_alloc_conf("expandable_segments:True");
  const double from_the_start = least_capacity(full, expandable, capacity);
  EXPECT_NEAR(from_the_start, 0.978, 0.001);
  for (const double cut : {0.2, 0.5, 0.8}) {
    snapshot::Snapshot snap = snapshot::read_snapshot_file(path);
    auto& trace = snap.device_traces[0];
    trace.erase(trace.begin(), trace.begin() + static_cast<std::ptrdiff_t>(cut * static_cast<double>(trace.size())));
    const PreparedTrace mid_run = prepare_trace(snap, 0, path);
    ASSERT_TRUE(mid_run.starts_mid_run);
    EXPECT_NEAR(least_capacity(mid_run, expandable, capacity), from_the_start, 0.005) << "cut at " << cut;
    // Inheriting the recorded segments instead, it would need 5.5% more than the capacity.
    EXPECT_GT(least_capacity(mid_run, mid_run.recorded_config, capacity), 1.05) << "cut at " << cut;
  }
}

// The same over every complete recording that ends in an OOM (fixtures, tests/data/heldout,
// tests/data/field), cut at 10%, 20%, … 90% of its trace: the least capacity at which expandable
// segments pass the OOM point from the cut trace's re-laid start against from the job's start,
// where the moment that decides the latter lies after the cut. The re-laid start is optimistic
// by at most 3.43% of the capacity when the OOM is in a training step (field vmae_edge cut at 80%, batch 87;
// 1.80% before it: dpo_edge cut at 90%, batch 36), 0.99% in an eval pass (held-out eval cut at 80%): the
// doctor's kRelaidStartStep keeps 4.3%, kRelaidStartEval 1.3%. The other way, it needed up to
// 3.09% more (eval_spike cut at 90%).
TEST(FieldTest, AReLaidStartIsOptimisticByLessThanTheDoctorsMargin) {
  const std::filesystem::path data = std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "tests" / "data";
  struct Case {
    std::string name;
    std::filesystem::path snapshot;
    bool eval;
  };
  std::vector<Case> cases;
  const auto phase_of = [](const std::filesystem::path& json) {
    std::ifstream in(json);
    const auto j = nlohmann::json::parse(in);
    return std::make_pair(j.value("outcome", std::string()) == "oom",
                          j.value("oom_phase", nlohmann::json()).is_string() && j["oom_phase"] == "eval");
  };
  for (const auto& entry : std::filesystem::directory_iterator(FRAGSCOPE_FIXTURES_DIR))
    if (std::filesystem::exists(entry.path() / "snapshot.pickle.zst") && entry.path().filename() != "big") {
      const auto [oom, eval] = phase_of(entry.path() / "truth.json");
      if (oom) cases.push_back({entry.path().filename().string(), entry.path() / "snapshot.pickle.zst", eval});
    }
  for (const auto& entry : std::filesystem::directory_iterator(data / "heldout")) {
    if (!std::filesystem::exists(entry.path() / "label.json")) continue;
    const auto [oom, eval] = phase_of(entry.path() / "label.json");
    if (oom) cases.push_back({entry.path().filename().string(), entry.path() / "snapshot.pickle.gz", eval});
  }
  for (const auto& entry : std::filesystem::directory_iterator(data / "field")) {
    if (!std::filesystem::exists(entry.path() / "truth.json")) continue;
    const auto [oom, eval] = phase_of(entry.path() / "truth.json");
    if (oom) cases.push_back({entry.path().filename().string(), entry.path() / "oom_snapshot.pickle.zst",
                              eval || entry.path().filename() == "hfc_lo" || entry.path().filename() == "hfn_edge"});
  }
  const alloc::AllocConfig expandable = alloc::parse_alloc_conf("expandable_segments:True");
  double worst_training = 0, worst_eval = 0, worst_pessimism = 0;
  std::size_t cuts = 0;
  for (const Case& c : cases) {
    const snapshot::Snapshot whole = snapshot::read_snapshot_file(c.snapshot.string());
    if (whole.device_traces.empty() || whole.device_traces[0].empty()) continue;  // history began after the OOM
    const PreparedTrace full = prepare_trace(whole, 0, c.snapshot.string());
    if (full.starts_mid_run || full.ooms.empty()) continue;
    const std::uint64_t capacity = *resolve_capacity(full, {}).effective_bytes();
    const double from_the_start = least_capacity(full, expandable, capacity, 1e-5);
    ReplayOptions just_below;
    just_below.capacity = static_cast<std::uint64_t>(static_cast<double>(capacity) * (from_the_start - 2e-5));
    just_below.timeline_points = 0;
    const ReplayResult below = run_replay(full, ModelKind::kCaching, expandable, just_below);
    const std::size_t decided_at = below.oom_trace_index.value_or(0);  // the moment that decides it
    for (int tenth = 1; tenth <= 9; ++tenth) {
      snapshot::Snapshot snap = snapshot::read_snapshot_file(c.snapshot.string());
      auto& trace = snap.device_traces[0];
      const auto cut = static_cast<std::size_t>(tenth * trace.size() / 10);
      if (cut >= decided_at) continue;
      trace.erase(trace.begin(), trace.begin() + static_cast<std::ptrdiff_t>(cut));
      const PreparedTrace mid_run = prepare_trace(snap, 0, c.snapshot.string());
      if (!mid_run.starts_mid_run) continue;
      const double optimism = from_the_start - least_capacity(mid_run, expandable, capacity, 1e-5);
      if (getenv("RELAID_TRACE"))
        std::cout << c.name << (c.eval ? " eval" : " train") << " cut " << tenth << "0% optimism " << 100 * optimism
                  << "%\n";
      (c.eval ? worst_eval : worst_training) = std::max(c.eval ? worst_eval : worst_training, optimism);
      if (relays_initial_state(mid_run, expandable)) worst_pessimism = std::max(worst_pessimism, -optimism);
      ++cuts;
    }
  }
  std::cout << cuts << " cuts: a re-laid start optimistic by at most " << 100 * worst_training
            << "% of the capacity in a training step, " << 100 * worst_eval
            << "% in an eval pass; pessimistic by at most " << 100 * worst_pessimism << "%\n";
  EXPECT_GE(cuts, 100u);
  EXPECT_LE(worst_training, 0.043);
  EXPECT_LE(worst_eval, 0.013);
}

}  // namespace
}  // namespace fragscope::replay

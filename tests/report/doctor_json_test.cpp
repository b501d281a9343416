// `doctor --json`: every key carries the diagnosis (field by field, in order where order means
// rank) and, for the recorded runs, the recording's own facts (truth.json, the trace). Absent
// facts are null, never 0. Keys and values only: new keys and key order are free.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../diagnose/field_recordings.h"
#include "../doctor_options.h"
#include "../fixture_snapshots.h"
#include "diagnose/doctor.h"
#include "metrics/trace_summary.h"
#include "recorded_diagnosis.h"
#include "report/doctor_report.h"

namespace fragscope::report {
namespace {

using diagnose::Diagnosis;
using nlohmann::json;
using testing::fixtures_dir;
using testing::read_json;
using testing::recorded_diagnosis;

json rendered(const Diagnosis& d) { return json::parse(doctor_json(d).dump()); }

/// Reserved bytes at frag_oom_104's OOM, walked from the end state through the trace
/// (metrics, not the doctor's own curve): 41487958016, as the OOM observer's snapshot shows.
std::uint64_t exact_reserved_at_oom() {
  const auto path = fixtures_dir() / "frag_oom_104" / "snapshot.pickle.zst";
  const auto summary = metrics::summarize_trace(testing::fixture_snapshot(path), 0);
  const auto truth = read_json(fixtures_dir() / "frag_oom_104" / "truth.json");
  return static_cast<std::uint64_t>(truth["reserved_at_trace_start"].get<std::int64_t>() +
                                    summary.reserved_rise_at_oom.at(0));
}

TEST(DoctorJson, FragmentationOomCarriesTheRecordingsFacts) {
  const auto truth = read_json(fixtures_dir() / "frag_oom_104" / "truth.json");
  const json j = rendered(recorded_diagnosis("frag_oom_104"));
  EXPECT_EQ(j.at("verdict"), truth["label"]);
  EXPECT_EQ(j.at("phase"), truth["oom_phase"]);
  EXPECT_NEAR(j.at("data_wait_fraction").get<double>(), truth["data_wait_fraction"].get<double>(), 1e-9);
  const json& oom = j.at("oom");
  ASSERT_TRUE(oom.is_object());
  EXPECT_EQ(oom.at("request_bytes"), truth["oom_event"]["size"]);
  EXPECT_EQ(oom.at("driver_free_bytes"), truth["oom_event"]["device_free"]);
  EXPECT_EQ(oom.at("trace_index"), truth["oom_event"]["index"]);
  EXPECT_LT(oom.at("largest_free_block_bytes").get<std::uint64_t>(), oom["request_bytes"].get<std::uint64_t>());
  EXPECT_TRUE(oom.at("rank").is_null());
  // What the process could hold: what it held at the OOM plus what the driver still had.
  EXPECT_EQ(j.at("capacity_bytes").get<std::uint64_t>(),
            exact_reserved_at_oom() + truth["oom_event"]["device_free"].get<std::uint64_t>());
  // The rerun with expandable segments at the same budget survived (that is the label).
  EXPECT_EQ(j.at("actions").at(0).at("setting"), "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
  EXPECT_EQ(j.at("actions").at(0).at("sufficient"), true);
  ASSERT_TRUE(j.at("recommended_alloc_conf").is_string());
  bool recorded_seen = false, recommended_seen = false;
  for (const json& w : j.at("whatif")) {
    EXPECT_GE(w.at("peak_reserved_bytes").get<std::uint64_t>(), j.at("ideal_peak_bytes").get<std::uint64_t>());
    if (w.at("recorded").get<bool>()) {
      recorded_seen = true;
      EXPECT_EQ(w.at("conf"), truth["alloc_conf"]);
      EXPECT_EQ(w.at("passes_oom_point"), false);  // it is the run that died
    }
    if (w.at("conf") == j["recommended_alloc_conf"]) {
      recommended_seen = true;
      EXPECT_EQ(w.at("passes_oom_point"), true);
    }
  }
  EXPECT_TRUE(recorded_seen);
  EXPECT_TRUE(recommended_seen);
  const json& used = j.at("inputs_used");
  EXPECT_EQ(used.size(), testing::doctor_user_files("frag_oom_104").size());
}

TEST(DoctorJson, SegmentMapTotalsAreTheOomObserversSnapshot) {
  // frag_oom_observer holds the snapshot PyTorch's OOM observer took at the OOM: its truth.
  const auto at_oom = read_json(fixtures_dir() / "frag_oom_observer" / "truth.json")["at_oom"];
  const json map = rendered(recorded_diagnosis("frag_oom_observer")).at("segment_map");
  ASSERT_TRUE(map.is_object());
  EXPECT_EQ(map.at("at_oom"), true);
  EXPECT_EQ(map.at("segments"), at_oom["segments"]);
  EXPECT_EQ(map.at("reserved_bytes"), at_oom["total_reserved"]);
  // Unsplit remainders (< 1 MiB each) may show as free: the largest hole is exact to 1 MiB.
  EXPECT_NEAR(map.at("largest_free_bytes").get<double>(), at_oom["largest_free_block"].get<double>(), 1 << 20);
  EXPECT_GE(map.at("free_bytes").get<std::uint64_t>() + (64u << 20), at_oom["free_external"].get<std::uint64_t>());
  EXPECT_TRUE(rendered(recorded_diagnosis("input_bound")).at("segment_map").is_null()) << "no snapshot";
}

TEST(DoctorJson, ReservedAtTheOomIsExactWhenTheTraceHasIt) {
  const json j = rendered(recorded_diagnosis("frag_oom_104"));
  EXPECT_EQ(j.at("oom").at("reserved_bytes").get<std::uint64_t>(), exact_reserved_at_oom());
}

TEST(DoctorJson, MirrorsTheDiagnosisFieldByField) {
  const Diagnosis& d = recorded_diagnosis("frag_oom_104");
  const json j = rendered(d);
  EXPECT_EQ(j.at("headline"), d.headline);
  EXPECT_EQ(j.at("phase_source"), d.phase_source);
  EXPECT_EQ(j.at("capacity_source"), d.capacity_source);
  ASSERT_EQ(j.at("evidence").size(), d.evidence.size());
  for (std::size_t i = 0; i < d.evidence.size(); ++i) {
    EXPECT_EQ(j["evidence"][i].at("key"), d.evidence[i].key);
    EXPECT_EQ(j["evidence"][i].at("text"), d.evidence[i].text);
  }
  ASSERT_EQ(j.at("actions").size(), d.actions.size());
  for (std::size_t i = 0; i < d.actions.size(); ++i) {  // ranked: order matters
    EXPECT_EQ(j["actions"][i].at("title"), d.actions[i].title);
    EXPECT_EQ(j["actions"][i].at("setting"), d.actions[i].setting);
    EXPECT_EQ(j["actions"][i].at("evidence"), d.actions[i].evidence);
    EXPECT_EQ(j["actions"][i].at("sufficient"), d.actions[i].sufficient);
  }
  ASSERT_EQ(j.at("do_not").size(), d.do_not.size());
  for (std::size_t i = 0; i < d.do_not.size(); ++i) EXPECT_EQ(j["do_not"][i].at("title"), d.do_not[i].title);
  ASSERT_EQ(j.at("whatif").size(), d.whatif.size());
  for (std::size_t i = 0; i < d.whatif.size(); ++i) {
    EXPECT_EQ(j["whatif"][i].at("conf"), d.whatif[i].conf);
    EXPECT_EQ(j["whatif"][i].at("peak_reserved_bytes"), d.whatif[i].peak_reserved_bytes);
    EXPECT_EQ(j["whatif"][i].at("fits"), json(d.whatif[i].fits.value()));
  }
  ASSERT_TRUE(d.projection.available);
  const json& p = j.at("projection");
  EXPECT_EQ(p.at("available"), true);
  EXPECT_EQ(p.at("projected_peak_bytes"), d.projection.projected_peak_bytes);
  EXPECT_EQ(p.at("static_bytes"), d.projection.static_bytes);
  EXPECT_EQ(p.at("reference_activation_bytes"), d.projection.reference_transient_bytes);
  EXPECT_EQ(p.at("failing_step"), d.projection.failing_step.value());
  EXPECT_EQ(p.at("reference_tokens"), d.projection.reference_tokens.value());
  EXPECT_DOUBLE_EQ(p.at("token_ratio").get<double>(), d.projection.token_ratio);
  // The token ratio is the failing step's tokens over the reference step's.
  EXPECT_NEAR(p["token_ratio"].get<double>(),
              p.at("failing_tokens").get<double>() / p.at("reference_tokens").get<double>(), 1e-12);
}

TEST(DoctorJson, InputBoundRunHasNoOomAndTheMeasuredWait) {
  const auto truth = read_json(fixtures_dir() / "input_bound" / "truth.json");
  const json j = rendered(recorded_diagnosis("input_bound"));
  EXPECT_EQ(j.at("verdict"), "input_bound");
  EXPECT_NEAR(j.at("data_wait_fraction").get<double>(), truth["data_wait_fraction"].get<double>(), 1e-9);
  EXPECT_GE(j.at("steady_data_wait_fraction").get<double>(), 0.10);  // the threshold
  EXPECT_TRUE(j.at("oom").is_null());
  EXPECT_TRUE(j.at("capacity_bytes").is_null());
  EXPECT_TRUE(j.at("whatif").empty());
  EXPECT_TRUE(j.at("recommended_alloc_conf").is_null());
  EXPECT_TRUE(j.at("ideal_peak_bytes").is_null());
  EXPECT_EQ(j.at("trigger"), "");
  EXPECT_FALSE(j.at("actions").empty());
}

TEST(DoctorJson, AbsentFactsAreNullNotZero) {
  Diagnosis d;
  d.verdict = diagnose::Verdict::kUndetermined;
  d.projection.available = false;
  d.projection.unavailable_reason = "no telemetry";
  d.decide_with = {"a snapshot with a trace"};
  diagnose::OomContext c;
  c.request_bytes = 1 << 30;
  c.rank = 3;
  d.oom_context = c;
  diagnose::RankFacts rank3;
  rank3.rank = 3;
  rank3.peak_allocated_bytes = 7;
  rank3.oom = true;
  rank3.sources = {"rank3/steps.jsonl"};
  d.ranks.push_back(rank3);
  d.worst_rank = 3;
  const json j = rendered(d);
  EXPECT_EQ(j.at("verdict"), "undetermined");
  EXPECT_EQ(j.at("projection"), json({{"available", false}, {"reason", "no telemetry"}}));
  EXPECT_EQ(j.at("decide_with"), json::array({"a snapshot with a trace"}));
  const json& oom = j.at("oom");
  EXPECT_EQ(oom.at("request_bytes"), 1 << 30);
  EXPECT_EQ(oom.at("rank"), 3);
  for (const char* key : {"driver_free_bytes", "reserved_bytes", "allocated_bytes", "reserved_unallocated_bytes",
                          "largest_free_block_bytes", "smi_used_bytes", "smi_total_bytes", "trace_index"})
    EXPECT_TRUE(oom.at(key).is_null()) << key;
  for (const char* key : {"data_wait_fraction", "steady_data_wait_fraction", "gpu_idle_fraction", "capacity_bytes",
                          "recommended_alloc_conf", "ideal_peak_bytes", "library_alloc_failure"})
    EXPECT_TRUE(j.at(key).is_null()) << key;
  ASSERT_EQ(j.at("ranks").size(), 1u);
  const json& rank = j["ranks"][0];
  EXPECT_EQ(rank.at("rank"), 3);
  EXPECT_TRUE(rank.at("peak_reserved_bytes").is_null());
  EXPECT_EQ(rank.at("peak_allocated_bytes"), 7);
  EXPECT_EQ(rank.at("oom"), true);
  EXPECT_EQ(rank.at("sources"), json::array({"rank3/steps.jsonl"}));
  EXPECT_EQ(j.at("worst_rank"), 3);
}

TEST(DoctorJson, ALibrarysAllocationFailureIsAnObject) {
  Diagnosis d;
  d.verdict = diagnose::Verdict::kUndetermined;
  d.library_failure = diagnose::LibraryFailure{"cuBLAS", "CUBLAS_STATUS_ALLOC_FAILED", "cublasCreate(handle)",
                                               "train.log:16"};
  const json j = rendered(d);
  EXPECT_EQ(j.at("library_alloc_failure"),
            json({{"library", "cuBLAS"}, {"status", "CUBLAS_STATUS_ALLOC_FAILED"}, {"call", "cublasCreate(handle)"},
                  {"source", "train.log:16"}}));
  EXPECT_TRUE(j.at("oom").is_null());
}

// A projected step's runs carry what each setting that runs it reserved at its peak, the room the longest batch
// seen must also leave (field trn_edge: expandable segments run it; a setting that fails has null).
TEST(DoctorJson, AProjectedStepsRunsCarryWhatTheyReserved) {
  diagnose::DoctorOptions options = fragscope::testing::doctor_options();
  options.threads = 2;
  const Diagnosis d =
      diagnose::run_doctor(diagnose::collect_doctor_inputs(fragscope::testing::field_user_files("trn_edge")), options);
  ASSERT_TRUE(d.trace_projection.available);
  const json runs = rendered(d).at("trace_projection").at("runs");
  ASSERT_EQ(runs.size(), d.trace_projection.runs.size());
  std::size_t running = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const diagnose::ProjectedRun& run = d.trace_projection.runs[i];
    EXPECT_EQ(runs[i].at("relaid_start"), run.relaid_start);
    if (run.runs) {
      ++running;
      EXPECT_EQ(runs[i].at("peak_reserved_bytes"), run.peak_reserved_bytes);
      EXPECT_GE(run.peak_reserved_bytes, d.trace_projection.projected_peak_bytes);
    } else {
      EXPECT_TRUE(runs[i].at("peak_reserved_bytes").is_null());
    }
  }
  EXPECT_GT(running, 0u);
}

// A run that grows (field leak_lo) carries its growth; one that does not (trn_edge) a null.
TEST(DoctorJson, ARunsGrowthOrNull) {
  diagnose::DoctorOptions options = fragscope::testing::doctor_options();
  options.threads = 2;
  const Diagnosis leak =
      diagnose::run_doctor(diagnose::collect_doctor_inputs(fragscope::testing::field_user_files("leak_lo")), options);
  const diagnose::RunGrowth& g = leak.run_growth;
  ASSERT_TRUE(g.grows());
  const json growth = rendered(leak).at("run_growth");
  EXPECT_EQ(growth.at("per_step_bytes"), g.per_step_bytes);
  EXPECT_EQ(growth.at("steps"), g.steps);
  EXPECT_EQ(growth.at("eval_batches"), false);
  EXPECT_EQ(growth.at("kept_bytes"), g.kept_bytes);
  EXPECT_EQ(growth.at("frame"), g.frame);
  const Diagnosis steady =
      diagnose::run_doctor(diagnose::collect_doctor_inputs(fragscope::testing::field_user_files("trn_edge")), options);
  EXPECT_TRUE(rendered(steady).at("run_growth").is_null());
}

}  // namespace
}  // namespace fragscope::report

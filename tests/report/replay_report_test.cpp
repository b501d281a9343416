// `replay` and `whatif` output: the JSON keys carry the replay's numbers, which for the recorded
// config are the recording's (truth.json: the replay is exact); the what-if table's verdicts are
// the ones established by experiment (frag_oom_104 was rerun with expandable segments at the
// same budget and survived). Keys and values, not layout.
#include "report/replay_report.h"

#include <algorithm>
#include <sstream>

#include <gtest/gtest.h>

#include "../fixture_snapshots.h"
#include "replay/capacity.h"
#include "replay/replay_summary.h"
#include "replay/whatif.h"
#include "util/bytes.h"

namespace fragscope::report {
namespace {

using nlohmann::json;
using testing::EndStateFixture;

replay::PreparedTrace prepare(const EndStateFixture& f) {
  return replay::prepare_trace(f.read(), 0, f.snapshot.string());
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class ReplayReport : public ::testing::TestWithParam<EndStateFixture> {};

TEST_P(ReplayReport, JsonIsTheRecordedRun) {
  const auto& f = GetParam();
  const auto trace = prepare(f);
  const auto capacity = replay::resolve_capacity(trace, {});
  const auto summary = replay::summarize_replay(trace, std::nullopt, capacity);
  const json j = json::parse(replay_json(summary).dump());
  const auto& t = f.truth;
  EXPECT_EQ(j.at("snapshot"), f.snapshot.string());
  EXPECT_EQ(j.at("trace_events"), t["trace_entries"]);
  EXPECT_EQ(j.at("starts_mid_run"), !t["trace_complete"].get<bool>());
  EXPECT_EQ(j.at("alloc_conf_is_recorded"), true);
  EXPECT_EQ(j.at("peak_reserved_bytes"), t["trace_window_peak_reserved"]);
  EXPECT_EQ(j.at("recorded").at("peak_reserved_bytes"), t["trace_window_peak_reserved"]);
  EXPECT_EQ(j.at("recorded").at("initial_reserved_bytes"), t["reserved_at_trace_start"]);
  EXPECT_EQ(j.at("self_check").at("segment_mismatches"), 0);
  EXPECT_TRUE(j["self_check"].at("first_mismatch_event_index").is_null());
  EXPECT_LE(j.at("ideal_peak_bytes").get<std::uint64_t>(), j["peak_reserved_bytes"].get<std::uint64_t>());
  EXPECT_GE(j.at("peak_allocated_bytes").get<std::uint64_t>(), j["allocated_bytes_at_end"].get<std::uint64_t>());
  EXPECT_EQ(j.at("reserved_bytes_at_end"), t["total_reserved"]);
  EXPECT_LT(j.at("last_event_index").get<std::uint64_t>(), t["trace_entries"].get<std::uint64_t>());
  if (f.oom()) {
    EXPECT_EQ(j.at("oom"), true);
    EXPECT_EQ(j.at("oom_event_index"), t["oom_event"]["index"]);
    EXPECT_EQ(j.at("recorded").at("oom_event_index"), t["oom_event"]["index"]);
    EXPECT_EQ(j.at("oom_matches_recorded"), true);
    EXPECT_EQ(j.at("num_ooms"), t["num_ooms"]);
    // The OOM entry's rounded request, as the allocator asked the driver for it.
    EXPECT_EQ(j.at("oom_request_bytes"), t["oom_event"]["size"]);
  } else {
    EXPECT_EQ(j.at("oom"), false);
    EXPECT_TRUE(j.at("oom_event_index").is_null());
    EXPECT_TRUE(j.at("oom_request_bytes").is_null());
    EXPECT_TRUE(j.at("recorded").at("oom_event_index").is_null());
    EXPECT_EQ(j.at("completed"), true);
    // The last op's event: the trace's last or, when that completes a free, the one before.
    EXPECT_GE(j.at("last_event_index").get<std::uint64_t>() + 2, t["trace_entries"].get<std::uint64_t>());
  }
  // The timeline: consecutive stretches of the trace, never above the peaks.
  const json& timeline = j.at("timeline");
  ASSERT_FALSE(timeline.empty());
  std::uint64_t previous_last = 0, highest = 0;
  for (std::size_t i = 0; i < timeline.size(); ++i) {
    const json& p = timeline[i];
    EXPECT_LE(p.at("first_event").get<std::uint64_t>(), p.at("last_event").get<std::uint64_t>());
    if (i > 0) {
      EXPECT_GT(p["first_event"].get<std::uint64_t>(), previous_last);
    }
    previous_last = p["last_event"].get<std::uint64_t>();
    EXPECT_LE(p.at("allocated_bytes").get<std::uint64_t>(), p.at("reserved_bytes").get<std::uint64_t>());
    highest = std::max(highest, p["reserved_bytes"].get<std::uint64_t>());
  }
  EXPECT_LE(highest, j["peak_reserved_bytes"].get<std::uint64_t>());
  EXPECT_EQ(previous_last, j["last_event_index"].get<std::uint64_t>());
}

TEST_P(ReplayReport, TextStatesTheComparisonWithTheRecording) {
  const auto& f = GetParam();
  const auto trace = prepare(f);
  const auto summary = replay::summarize_replay(trace, std::nullopt, replay::resolve_capacity(trace, {}));
  std::ostringstream out;
  write_replay_text(out, summary);
  const std::string text = out.str();
  EXPECT_TRUE(contains(text, f.snapshot.string()));
  EXPECT_TRUE(contains(text, std::to_string(f.truth["trace_entries"].get<std::uint64_t>()) + " events"));
  EXPECT_TRUE(contains(text, format_bytes(f.truth["trace_window_peak_reserved"].get<std::uint64_t>())));
  EXPECT_TRUE(contains(text, "exact")) << "peak equals the recorded peak";
  EXPECT_TRUE(contains(text, "every malloc's segment events match the recording"));
  EXPECT_TRUE(contains(text, f.truth["trace_complete"].get<bool>() ? "complete from an empty allocator"
                                                                    : "starts mid-run"));
  if (f.oom()) {
    EXPECT_TRUE(contains(text, "at event " + std::to_string(f.truth["oom_event"]["index"].get<std::uint64_t>())));
    EXPECT_TRUE(contains(text, "where the recorded run failed too"));
  }
  EXPECT_TRUE(contains(text, "█")) << "the timeline chart";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ReplayReport, ::testing::ValuesIn(testing::end_state_fixtures()),
                         testing::fixture_name);

/// frag_oom_104 swept at the capacity the trace recorded (reserved at the OOM + driver free).
struct FragSweep {
  EndStateFixture fixture;
  replay::PreparedTrace trace;
  replay::WhatIfReport report;
};

const FragSweep& frag_sweep() {
  static const FragSweep sweep = [] {
    FragSweep s;
    for (auto& f : testing::oom_fixtures())
      if (f.name == "frag_oom_104") s.fixture = f;
    s.trace = prepare(s.fixture);
    replay::WhatIfOptions options;
    options.threads = 2;
    s.report = replay::sweep_at_capacity(s.trace, replay::resolve_capacity(s.trace, {}), options);
    return s;
  }();
  return sweep;
}

TEST(WhatIfReport, JsonHasTheExperimentsVerdicts) {
  const FragSweep& s = frag_sweep();
  const auto& t = s.fixture.truth;
  const json j = json::parse(whatif_json(s.trace, s.report).dump());
  // At an OOM entry the process could reserve exactly what it held plus what the driver had free.
  const auto held_at_oom =
      replay::resolve_capacity(s.trace, {}).bytes.value() - t["oom_event"]["device_free"].get<std::uint64_t>();
  EXPECT_NEAR(static_cast<double>(held_at_oom) / static_cast<double>(kGiB), 35.25 + 3.39, 0.0101) << "OOM message";
  EXPECT_EQ(j.at("capacity").at("bytes").get<std::uint64_t>(), s.report.capacity.bytes.value());
  EXPECT_EQ(j.at("trace_events"), t["trace_entries"]);
  const json& configs = j.at("configs");
  ASSERT_EQ(configs.size(), s.report.rows.size());
  ASSERT_GE(configs.size(), 3u);
  const auto floor = j.at("ideal_peak_bytes").get<std::uint64_t>();
  std::size_t recorded = 0;
  bool expandable_fits = false;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const json& c = configs[i];
    EXPECT_GE(c.at("peak_reserved_bytes").get<std::uint64_t>(), floor) << c;
    if (i > 0) {
      EXPECT_GE(c["peak_reserved_bytes"].get<std::uint64_t>(),
                configs[i - 1]["peak_reserved_bytes"].get<std::uint64_t>());
    }
    ASSERT_TRUE(c.contains("at_capacity"));
    EXPECT_EQ(c.at("fits_capacity"), !c["at_capacity"]["oom"].get<bool>());
    if (c.at("recorded").get<bool>()) {
      ++recorded;
      EXPECT_EQ(c.at("alloc_conf"), t["alloc_conf"]);
      EXPECT_EQ(c["at_capacity"]["oom"], true);  // the real run died here
      EXPECT_EQ(c["at_capacity"]["oom_event_index"], t["oom_event"]["index"]);
      EXPECT_EQ(c["at_capacity"].at("num_alloc_retries"), t["num_alloc_retries"]);  // as the real run counted
      EXPECT_EQ(c["at_capacity"].at("peak_reserved_bytes"), t["max_memory_reserved"]);
    }
    if (c["alloc_conf"] == "expandable_segments:True") expandable_fits = c["fits_capacity"].get<bool>();
  }
  EXPECT_EQ(recorded, 1u);
  EXPECT_TRUE(expandable_fits) << "the rerun with expandable_segments:True survived this budget";
  // The recommendation is the fitting config with the least peak.
  ASSERT_TRUE(j.at("recommended_alloc_conf").is_string());
  const auto best =
      std::find_if(configs.begin(), configs.end(), [](const json& c) { return c["fits_capacity"].get<bool>(); });
  ASSERT_NE(best, configs.end());
  EXPECT_EQ(j["recommended_alloc_conf"], (*best)["alloc_conf"]);
}

TEST(WhatIfReport, TextMarksTheRecordedRowAndRecommends) {
  const FragSweep& s = frag_sweep();
  std::ostringstream out;
  write_whatif_text(out, s.trace, s.report);
  const std::string text = out.str();
  ASSERT_TRUE(s.report.recommended.has_value());
  const auto& best = s.report.rows[*s.report.recommended];
  EXPECT_TRUE(contains(text, "recommended: PYTORCH_CUDA_ALLOC_CONF=" + best.config.conf)) << text;
  EXPECT_TRUE(contains(text, "(defaults) *")) << "the recorded config, PyTorch's defaults, is marked";
  EXPECT_TRUE(
      contains(text, "OOM at event " + std::to_string(s.fixture.truth["oom_event"]["index"].get<std::uint64_t>())));
  EXPECT_TRUE(contains(text, format_bytes(s.report.ideal.stats.peak_reserved_bytes))) << "the floor";
  EXPECT_TRUE(contains(text, std::to_string(s.report.rows.size()) + " configs"));
  for (const auto& row : s.report.rows) {
    if (!row.config.conf.empty()) {
      EXPECT_TRUE(contains(text, row.config.conf)) << row.config.conf;
    }
  }
}

}  // namespace
}  // namespace fragscope::report

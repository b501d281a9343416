// The doctor's HTML page as written (what Chromium makes of it: doctor_html_page_test.mjs): the
// key figures are the diagnosis's, the page's data holds what each panel draws, reduced so any
// trace makes a small page, and text from the user's files is escaped.
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "recorded_diagnosis.h"
#include "report/doctor_page_data.h"
#include "report/doctor_report.h"
#include "util/bytes.h"

namespace fragscope::report {
namespace {

using diagnose::Diagnosis;
using nlohmann::json;
using testing::recorded_diagnosis;

std::string page(const Diagnosis& d) {
  std::ostringstream out;
  write_doctor_html(out, d);
  return out.str();
}

/// The data-value of the key figure `id`, and its words.
std::pair<std::string, std::string> figure(const std::string& html, const std::string& id) {
  std::smatch m;
  const std::regex pattern(
      "id=\"" + id + "\" data-value=\"([^\"]*)\"><span class=\"label\">[^<]*</span><span class=\"value\">([^<]*)<");
  if (!std::regex_search(html, m, pattern)) return {};
  return {m[1], m[2]};
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(DoctorHtml, KeyFiguresAreTheDiagnosis) {
  const Diagnosis& d = recorded_diagnosis("frag_oom_104");
  ASSERT_TRUE(d.oom_context.has_value());
  const std::string html = page(d);
  const auto& c = *d.oom_context;
  EXPECT_EQ(figure(html, "n-reserved"), std::pair(std::to_string(*c.reserved_bytes), format_bytes(*c.reserved_bytes)));
  EXPECT_EQ(figure(html, "n-allocated"),
            std::pair(std::to_string(*c.allocated_bytes), format_bytes(*c.allocated_bytes)));
  EXPECT_EQ(figure(html, "n-request"), std::pair(std::to_string(c.request_bytes), format_bytes(c.request_bytes)));
  EXPECT_EQ(figure(html, "n-largest-hole"),
            std::pair(std::to_string(*c.largest_free_block), format_bytes(*c.largest_free_block)));
  EXPECT_EQ(figure(html, "n-capacity").first, std::to_string(*d.capacity_bytes));
  std::uint64_t free_bytes = 0;
  for (const auto& row : d.segment_map) free_bytes += row.free_bytes;
  EXPECT_EQ(figure(html, "n-free-in-segments").first, std::to_string(free_bytes));
  EXPECT_NE(html.find("id=\"verdict\">fragmentation<"), std::string::npos);
  for (const char* panel : {"id=\"segment-lot\"", "id=\"memory-curve\"", "id=\"step-times\""})
    EXPECT_NE(html.find(panel), std::string::npos) << panel;
  EXPECT_EQ(html.find("id=\"ranks\""), std::string::npos) << "one rank: no per-rank panel";
}

TEST(DoctorHtml, CurveDataKeepsEveryExtremeAndPlacesStepsBeforeTheOom) {
  const Diagnosis& d = recorded_diagnosis("frag_oom_104");
  const json curve = doctor_page_data(d)["curve"];
  ASSERT_EQ(curve["x_unit"], "s");
  ASSERT_EQ(curve["x"].size(), d.timeline.size());
  std::uint64_t peak = 0;
  for (const auto& p : d.timeline) peak = std::max(peak, p.reserved_bytes);
  EXPECT_EQ(*std::max_element(curve["reserved"].begin(), curve["reserved"].end()), peak);
  for (std::size_t i = 1; i < curve["x"].size(); ++i)
    EXPECT_GE(curve["x"][i].get<double>(), curve["x"][i - 1].get<double>());
  // The OOM at its event's time; step 0 ended before the failing step began, which began before the OOM.
  EXPECT_EQ(curve["oom"]["event"], *d.timeline_oom_index);
  ASSERT_EQ(curve["steps"].size(), 1u);
  const double step0 = curve["steps"][0]["x"], failing = curve["failing"]["x"], oom = curve["oom"]["x"];
  EXPECT_LE(step0, failing);
  EXPECT_LT(failing, oom);
  EXPECT_EQ(curve["failing"]["step"], 1);
  EXPECT_EQ(curve["failing"]["phase"], "train");
  EXPECT_EQ(curve["capacity_bytes"], *d.capacity_bytes);
}

TEST(DoctorHtml, SegmentDataSetsTheRequestAgainstEveryFreeByte) {
  const Diagnosis& d = recorded_diagnosis("frag_oom_104");
  const json seg = doctor_page_data(d)["segments"];
  EXPECT_EQ(seg["request_bytes"], d.oom_context->request_bytes);
  std::uint64_t in_slots = 0, free_in_slots = 0, holes = 0;
  std::size_t segments = 0;
  for (const auto& slot : seg["slots"]) {
    segments += slot["count"].get<std::size_t>();
    in_slots += slot["size"].get<std::uint64_t>();
    free_in_slots += slot["free"].get<std::uint64_t>();
    EXPECT_EQ(slot.contains("runs"), slot["count"] == 1);
  }
  for (const auto& bucket : seg["holes"]) holes += bucket["bytes"].get<std::uint64_t>();
  EXPECT_EQ(segments, d.segment_map.size());
  EXPECT_EQ(in_slots, seg["reserved_bytes"]);
  EXPECT_EQ(free_in_slots, seg["free_bytes"]);
  EXPECT_EQ(holes, seg["free_bytes"]);
  EXPECT_LT(seg["largest_free_bytes"].get<std::uint64_t>(), seg["request_bytes"].get<std::uint64_t>());
}

TEST(DoctorHtml, TelemetryAndNvidiaSmiAreDrawnSampleBySample) {
  const Diagnosis& d = recorded_diagnosis("input_bound");
  const json data = doctor_page_data(d);
  ASSERT_FALSE(d.step_times.empty());
  EXPECT_EQ(data["steps"]["step"].size(), d.step_times.size());
  EXPECT_EQ(data["steps"]["wait_ms"][0].get<double>(), std::round(d.step_times[0].data_wait_ms * 1000) / 1000);
  ASSERT_FALSE(data["smi"].is_null());
  EXPECT_EQ(data["smi"]["seconds"].size(), d.smi_trace.size());
  EXPECT_TRUE(data["segments"].is_null()) << "no snapshot, no segments";
  EXPECT_TRUE(data["curve"].is_null());
  const std::string html = page(d);
  EXPECT_EQ(html.find("id=\"segment-lot\""), std::string::npos);
  EXPECT_NE(html.find("id=\"smi-trace\""), std::string::npos);
}

TEST(DoctorHtml, LongSeriesAreReducedKeepingTheirExtremes) {
  Diagnosis d;
  for (int i = 0; i < 100000; ++i)
    d.step_times.push_back({i, i == 77777 ? 9000.0 : 5.0, 100.0, i * 0.1, std::nullopt, std::nullopt});
  for (int i = 0; i < 50000; ++i) d.smi_trace.push_back({i * 0.1, i == 123 ? 0.0 : 90.0, 1ull << 30});
  const json data = doctor_page_data(d);
  EXPECT_EQ(data["steps"]["step"].size(), kPageSeriesPoints);
  EXPECT_EQ(data["steps"]["step"].back(), 99999);
  EXPECT_EQ(*std::max_element(data["steps"]["wait_ms"].begin(), data["steps"]["wait_ms"].end()), 9000.0);
  EXPECT_EQ(data["smi"]["seconds"].size(), kPageSeriesPoints);
  EXPECT_EQ(*std::min_element(data["smi"]["utilization_min"].begin(), data["smi"]["utilization_min"].end()), 0.0);
  EXPECT_LT(page(d).size(), 1'000'000u);
}

TEST(DoctorHtml, ASegmentOfMoreRunsThanPixelsIsDrawnInSlicesKeepingEachKindsBytes) {
  using metrics::RunKind;
  Diagnosis d;
  metrics::SegmentRow row;
  row.total_size = 20000 * kMiB;
  for (std::uint64_t i = 0; i < 20000; ++i)  // 1 MiB runs: allocated, free, allocated, ...
    row.runs.push_back({i % 2 ? RunKind::kFree : RunKind::kAllocated, i * kMiB, kMiB, 0});
  row.free_bytes = 10000 * kMiB;
  row.largest_free = kMiB;
  d.segment_map.push_back(row);
  const json slot = doctor_page_data(d)["segments"]["slots"][0];
  const json& runs = slot["runs"];
  ASSERT_LE(runs.size(), 3 * 3 * kPageRunsPerSegment);
  std::uint64_t covered = 0, free_drawn = 0;
  for (std::size_t i = 0; i < runs.size(); i += 3) {
    EXPECT_EQ(runs[i + 1], covered) << "the slices tile the segment";
    covered += runs[i + 2].get<std::uint64_t>();
    if (runs[i] == static_cast<int>(RunKind::kFree)) free_drawn += runs[i + 2].get<std::uint64_t>();
  }
  EXPECT_EQ(covered, row.total_size);
  EXPECT_EQ(free_drawn, row.free_bytes) << "half the segment is drawn free, as it is";
  EXPECT_EQ(slot["free"], row.free_bytes) << "the totals stay exact";
}

TEST(DoctorHtml, TextFromTheUsersFilesIsEscaped) {
  Diagnosis d;
  d.verdict = diagnose::Verdict::kUndetermined;
  const std::string hostile = "<img src=x onerror=alert(1)>&\"";
  d.headline = hostile;
  d.add_evidence("oom", "the OOM message in /tmp/" + hostile + ".log");
  d.actions.push_back({hostile, "PYTORCH_CUDA_ALLOC_CONF=" + hostile, hostile, false});
  d.decide_with = {hostile};
  d.inputs_used = {"snapshot: /runs/" + hostile + ".pickle"};
  d.phase = "train";
  d.phase_source = hostile;
  diagnose::WhatIfLine line;
  line.conf = hostile;
  line.recorded = true;
  line.peak_reserved_bytes = kGiB;
  d.whatif.push_back(line);
  d.phase = hostile;  // reaches the page's data too
  d.timeline.push_back({0, kGiB, kGiB, kGiB, kGiB, std::nullopt});
  d.timeline_oom_index = 0;
  d.failing_unit_start = 0;
  const std::string html = page(d);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("onerror=alert(1)>"), std::string::npos);
  EXPECT_GE(count(html, "&lt;img src=x onerror=alert(1)&gt;&amp;"), 7u);
  EXPECT_NE(html.find("\\u003cimg src=x onerror=alert(1)\\u003e\\u0026"), std::string::npos)
      << "in the data, as JSON escapes";
}

}  // namespace
}  // namespace fragscope::report

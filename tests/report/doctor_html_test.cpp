// The doctor's HTML page, beyond what Chromium checks (tests/cli/doctor_command_test.cpp: it
// renders, fetches nothing, logs no error): the pictures say what the numbers say. The failed
// request is drawn beside the largest hole on one scale, the OOM marker sits at its event, the
// what-if table marks one recorded and one recommended row; text from the user's files is
// escaped.
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "recorded_diagnosis.h"
#include "report/doctor_report.h"
#include "util/bytes.h"

namespace fragscope::report {
namespace {

using diagnose::Diagnosis;
using testing::recorded_diagnosis;

std::string page(const Diagnosis& d) {
  std::ostringstream out;
  write_doctor_html(out, d);
  return out.str();
}

/// The numeric attribute `name` of the first element whose opening tag matches `tag_pattern`.
double attribute(const std::string& html, const std::string& tag_pattern, const std::string& name) {
  std::smatch tag;
  if (!std::regex_search(html, tag, std::regex("<[^>]*" + tag_pattern + "[^>]*>"))) {
    ADD_FAILURE() << "no tag matching " << tag_pattern;
    return -1;
  }
  std::smatch value;
  const std::string text = tag.str();
  if (!std::regex_search(text, value, std::regex(" " + name + "=\"([-0-9.]+)\""))) {
    ADD_FAILURE() << "no " << name << " in " << text;
    return -1;
  }
  return std::stod(value[1]);
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(DoctorHtml, FailedRequestIsDrawnBesideTheLargestHoleOnOneScale) {
  const Diagnosis& d = recorded_diagnosis("frag_oom_104");
  ASSERT_TRUE(d.segment_map_at_oom);
  ASSERT_TRUE(d.oom_context.has_value());
  const std::string html = page(d);
  std::uint64_t largest = 0;
  for (const auto& row : d.segment_map) largest = std::max(largest, row.largest_free);
  const double request_x = attribute(html, "id=\"failed-request\"", "x");
  const double request_width = attribute(html, "id=\"failed-request\"", "width");
  const double hole_x = attribute(html, "stroke=\"#2e8540\"", "x");  // the largest hole's outline
  const double hole_width = attribute(html, "stroke=\"#2e8540\"", "width");
  EXPECT_NEAR(request_x, hole_x, 0.01) << "the request starts where the hole does";
  // 1.54 GiB against a 38 MiB hole: the picture's proportion is the numbers'.
  EXPECT_NEAR(request_width / hole_width,
              static_cast<double>(d.oom_context->request_bytes) / static_cast<double>(largest),
              0.01 * request_width / hole_width);
  EXPECT_NE(
      html.find("request " + format_bytes(d.oom_context->request_bytes) + " vs largest hole " + format_bytes(largest)),
      std::string::npos);
  EXPECT_NE(html.find("Segment map at the OOM"), std::string::npos);
  // The segments not drawn are counted: all of them are either drawn or in the note.
  std::smatch note;
  ASSERT_TRUE(std::regex_search(html, note, std::regex(R"((\d+) smaller segments not drawn)")));
  const std::size_t drawn = count(html, "<title>segment at 0x");
  EXPECT_EQ(drawn + std::stoul(note[1]), d.segment_map.size());
}

TEST(DoctorHtml, HoleOutlineIsTheLargestFreeRunOfItsSegment) {
  using metrics::RunKind;
  Diagnosis d;
  d.verdict = diagnose::Verdict::kFragmentation;
  d.segment_map_at_oom = true;
  // One 7 MiB segment: 1 MiB free, 2 MiB allocated, 4 MiB free; an 8 MiB request failed.
  d.segment_map.push_back({0, 0x7f0000000000, {0, 0}, 7 * kMiB, 5 * kMiB, 4 * kMiB,
                           {{RunKind::kFree, 0, kMiB, 0}, {RunKind::kAllocated, kMiB, 2 * kMiB, 2 * kMiB},
                            {RunKind::kFree, 3 * kMiB, 4 * kMiB, 0}}});
  diagnose::OomContext oom;
  oom.request_bytes = 8 * kMiB;
  d.oom_context = oom;
  const std::string html = page(d);
  // The scale is the request (8 MiB over 1060 px, from x = 90): the hole is at 3 MiB, 4 MiB wide.
  EXPECT_NEAR(attribute(html, "stroke=\"#2e8540\"", "x"), 90 + 1060 * 3.0 / 8, 0.01);
  EXPECT_NEAR(attribute(html, "stroke=\"#2e8540\"", "width"), 1060 * 4.0 / 8, 0.01);
  EXPECT_NEAR(attribute(html, "id=\"failed-request\"", "x"), 90 + 1060 * 3.0 / 8, 0.01);
  EXPECT_NEAR(attribute(html, "id=\"failed-request\"", "width"), 1060.0, 0.01);
}

TEST(DoctorHtml, OomMarkerSitsAtItsEventOnTheTimeline) {
  const Diagnosis& d = recorded_diagnosis("frag_oom_104");
  ASSERT_TRUE(d.timeline_oom_index.has_value());
  ASSERT_FALSE(d.timeline.empty());
  const std::string html = page(d);
  // x = 80 + 1100 × event / last event of the curve (the chart's left margin and width).
  const double expected =
      80 + 1100 * static_cast<double>(*d.timeline_oom_index) / static_cast<double>(d.timeline.back().trace_index);
  EXPECT_NEAR(attribute(html, "id=\"oom-marker\"", "x1"), expected, 0.06);
  EXPECT_NE(html.find("OOM (event " + std::to_string(*d.timeline_oom_index) + ")"), std::string::npos);
  EXPECT_NE(html.find("capacity " + format_bytes(*d.capacity_bytes)), std::string::npos);
}

TEST(DoctorHtml, WhatIfTableMarksOneRecordedAndOneRecommendedRow) {
  const Diagnosis& d = recorded_diagnosis("frag_oom_104");
  const std::string html = page(d);
  const auto table = html.substr(html.find("<table id=\"whatif\""));
  const std::string rows = table.substr(0, table.find("</table>"));
  EXPECT_EQ(count(rows, "<tr"), d.whatif.size() + 2);  // heading, one per config, the floor
  EXPECT_EQ(count(rows, "(recorded)"), 1u);
  EXPECT_EQ(count(rows, "class=\"rec\""), 1u);
  EXPECT_NE(rows.find(d.recommended_conf + "</code> ← recommended"), std::string::npos);
  for (const auto& w : d.whatif) {  // at a known capacity: what the setting reserved under it
    const std::uint64_t reserved = d.capacity_bytes ? w.peak_reserved_at_capacity_bytes.value_or(w.peak_reserved_bytes)
                                                    : w.peak_reserved_bytes;
    EXPECT_NE(rows.find(format_bytes(reserved)), std::string::npos) << w.conf;
  }
}

TEST(DoctorHtml, StepTimesAreOneBarPairPerTelemetryRecord) {
  const Diagnosis& d = recorded_diagnosis("input_bound");
  const std::string html = page(d);
  ASSERT_FALSE(d.step_times.empty());
  EXPECT_EQ(count(html, "<title>step "), d.step_times.size());
  EXPECT_EQ(html.find("id=\"segment-map\""), std::string::npos) << "no snapshot, no map";
  EXPECT_NE(html.find("id=\"verdict\">input_bound<"), std::string::npos);
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
  d.whatif.push_back({hostile, true, kGiB, true, false});
  const std::string html = page(d);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("onerror=alert(1)>"), std::string::npos);
  EXPECT_GE(count(html, "&lt;img src=x onerror=alert(1)&gt;&amp;"), 8u);
}

}  // namespace
}  // namespace fragscope::report

// `doctor` as text: the verdict, every piece of evidence, the actions in rank order with their
// exact settings, and the what-if table with the recorded and recommended rows marked. Facts,
// not layout.
#include <sstream>

#include <gtest/gtest.h>

#include "../fixture_snapshots.h"
#include "recorded_diagnosis.h"
#include "report/doctor_report.h"
#include "util/bytes.h"

namespace fragscope::report {
namespace {

using diagnose::Diagnosis;
using diagnose::WhatIfLine;
using testing::recorded_diagnosis;

std::string render(const Diagnosis& d) {
  std::ostringstream out;
  write_doctor_text(out, d);
  return out.str();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// The line of `text` that holds `part` (empty when none).
std::string line_with(const std::string& text, const std::string& part) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (contains(line, part)) return line;
  return "";
}

/// The table row of config `name`: the line whose first word is the name (names hold no spaces).
std::string row_of(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find_first_not_of(' ');
    if (first != std::string::npos && line.compare(first, name.size() + 1, name + " ") == 0) return line;
  }
  return "";
}

/// The first number on the line holding `label`.
double number_after(const std::string& text, const std::string& label) {
  const std::string line = line_with(text, label);
  const auto at = line.find_first_of("0123456789", line.find(label) + label.size());
  return at == std::string::npos ? -1 : std::stod(line.substr(at));
}

TEST(DoctorText, FragmentationReportStatesEveryFinding) {
  const Diagnosis& d = recorded_diagnosis("frag_oom_104");
  const std::string text = render(d);
  EXPECT_TRUE(contains(text.substr(0, text.find('\n')), "fragmentation"));
  EXPECT_TRUE(contains(text, d.headline));
  for (const auto& e : d.evidence) EXPECT_TRUE(contains(text, e.text)) << e.key;
  // Actions in rank order, each with its exact setting.
  std::size_t previous = 0;
  for (const auto& a : d.actions) {
    const std::size_t at = text.find(a.title);
    ASSERT_NE(at, std::string::npos) << a.title;
    EXPECT_GT(at, previous) << a.title << " out of order";
    previous = at;
    if (!a.setting.empty()) {
      EXPECT_TRUE(contains(text.substr(at), a.setting)) << a.setting;
    }
    EXPECT_EQ(contains(line_with(text, a.title), "not shown to be enough"), !a.sufficient) << a.title;
  }
  for (const auto& a : d.do_not) EXPECT_TRUE(contains(text, a.title)) << a.title;
  ASSERT_TRUE(d.capacity_bytes.has_value());
  EXPECT_TRUE(contains(text, format_bytes(*d.capacity_bytes)));
  EXPECT_TRUE(contains(text, format_bytes(d.projection.projected_peak_bytes)));
  EXPECT_NEAR(number_after(text, "data wait"), 100 * *d.data_wait_fraction, 0.051) << "percent of step time";
}

TEST(DoctorText, WhatIfRowsMarkRecordedAndRecommendedWithTheirOutcome) {
  const Diagnosis& d = recorded_diagnosis("frag_oom_104");
  const std::string text = render(d);
  ASSERT_FALSE(d.whatif.empty());
  ASSERT_FALSE(d.recommended_conf.empty());
  for (const WhatIfLine& w : d.whatif) {
    const std::string name = w.conf.empty() ? "(defaults)" : w.conf;
    const std::string line = row_of(text, name);
    ASSERT_FALSE(line.empty()) << name;
    // At a known capacity the column is what the setting reserved under it, up to where it stopped.
    const std::uint64_t reserved = d.capacity_bytes ? w.peak_reserved_at_capacity_bytes.value_or(w.peak_reserved_bytes)
                                                    : w.peak_reserved_bytes;
    EXPECT_TRUE(contains(line, format_bytes(reserved))) << line;
    EXPECT_EQ(contains(line, name + " *"), w.recorded) << line;
    EXPECT_EQ(contains(line, "←"), w.conf == d.recommended_conf) << line;
  }
  const std::string recorded = row_of(text, "(defaults)");
  EXPECT_TRUE(contains(recorded, "OOM")) << "the recorded config dies at the capacity, as the run did";
  const std::string recommended = row_of(text, d.recommended_conf);
  EXPECT_TRUE(contains(recommended, "fits")) << recommended;
  ASSERT_TRUE(d.ideal_peak_bytes.has_value());
  EXPECT_TRUE(contains(line_with(text, "ideal packer"), format_bytes(*d.ideal_peak_bytes)));
}

// A projection no other earlier unit could check says so in words (field crs_edge), not "within ?".
TEST(DoctorText, AProjectionsFitIsCheckedOrSaidUnchecked) {
  Diagnosis d;
  d.verdict = diagnose::Verdict::kUndetermined;
  d.trace_projection.available = true;
  d.trace_projection.projected_peak_bytes = 32104722432;
  d.trace_projection.reference_unit = 1;
  d.trace_projection.earlier_units = 1;
  d.trace_projection.scale = 1.45;
  EXPECT_EQ(line_with(render(d), "projected"),
            "projected  29.90 GiB peak for the failing step with perfect packing (from unit 1 of 2, sizes ×1.450; its "
            "fit unchecked: no other earlier unit allocates like it)");
  d.trace_projection.fit_error = 0.0043;
  d.trace_projection.checked_units = 4;
  EXPECT_TRUE(contains(line_with(render(d), "projected"), "sizes ×1.450; fit within 0.4% on 4 earlier units)"));
}

TEST(DoctorText, InputBoundReportHasNoWhatIfTable) {
  const Diagnosis& d = recorded_diagnosis("input_bound");
  const std::string text = render(d);
  EXPECT_TRUE(contains(text.substr(0, text.find('\n')), "input_bound"));
  EXPECT_FALSE(contains(text, "what if"));
  EXPECT_NEAR(number_after(text, "data wait"), 100 * *d.data_wait_fraction, 0.051) << "percent of step time";
  for (const auto& e : d.evidence) EXPECT_TRUE(contains(text, e.text)) << e.key;
  for (const auto& used : d.inputs_used) EXPECT_TRUE(contains(text, used)) << used;
}

TEST(DoctorText, AtCapacityColumnSaysWhatTheReplayFound) {
  Diagnosis d;
  d.verdict = diagnose::Verdict::kFragmentation;
  d.capacity_bytes = 40 * kGiB;
  d.recommended_conf = "expandable_segments:True";
  const auto row = [](std::string conf, std::uint64_t reserved, std::optional<bool> passes, std::optional<bool> fits) {
    WhatIfLine w;
    w.conf = std::move(conf);
    w.peak_reserved_bytes = reserved;
    w.passes_oom_point = passes;
    w.fits = fits;
    return w;
  };
  d.whatif = {row("", 46 * kGiB, false, false), row("expandable_segments:True", 37 * kGiB, true, true),
              row("max_split_size_mb:512", 45 * kGiB, true, false),
              row("roundup_power2_divisions:4", 44 * kGiB, std::nullopt, std::nullopt)};
  d.whatif[0].recorded = true;
  d.whatif[0].oom_event = 9;
  const std::string text = render(d);
  EXPECT_TRUE(contains(row_of(text, "(defaults)"), "OOM"));
  EXPECT_TRUE(contains(row_of(text, "expandable_segments:True"), "fits"));
  EXPECT_TRUE(contains(row_of(text, "max_split_size_mb:512"), "passes the OOM"));
  const std::string unknown = row_of(text, "roundup_power2_divisions:4");
  ASSERT_FALSE(unknown.empty());
  EXPECT_FALSE(contains(unknown, "OOM"));
  EXPECT_FALSE(contains(unknown, "fits"));
  EXPECT_TRUE(contains(line_with(text, "what if"), format_bytes(40 * kGiB))) << "the capacity it was replayed at";
}

}  // namespace
}  // namespace fragscope::report

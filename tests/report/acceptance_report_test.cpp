// `check` output on the recorded input-pipeline runs: the JSON's counts agree with its rows, the
// criteria round-trip, and the measured values are the recording's (computed here from
// steps.jsonl and smi_trace.csv); the table has one line per result and the right verdict line.
#include "report/acceptance_report.h"

#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../fixture_support.h"

namespace fragscope::report {
namespace {

using diagnose::CheckReport;
using diagnose::CriterionVerdict;
using inputs::AcceptanceCriteria;
using nlohmann::json;
using testing::fixtures_dir;

struct Checked {
  AcceptanceCriteria criteria;
  CheckReport report;
};

Checked check(const std::string& scenario, const AcceptanceCriteria& criteria = {}) {
  const auto dir = fixtures_dir() / scenario;
  const auto input = diagnose::read_check_input({(dir / "steps.jsonl").string()}, {(dir / "smi_trace.csv").string()});
  return {criteria, diagnose::check_acceptance(criteria, input)};
}

std::vector<json> steps(const std::string& scenario) {
  std::ifstream in(fixtures_dir() / scenario / "steps.jsonl");
  std::vector<json> records;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) records.push_back(json::parse(line));
  return records;
}

/// Σ wait / Σ (wait + compute) over the records after the first `warmup` optimizer steps.
double steady_data_wait(const std::vector<json>& records, int warmup) {
  double wait = 0, total = 0;
  int steps_done = 0;
  for (const json& r : records) {
    if (steps_done >= warmup) {
      wait += r["data_wait_ms"].get<double>();
      total += r["data_wait_ms"].get<double>() + r["compute_ms"].get<double>();
    }
    if (r.value("optimizer_step", true)) ++steps_done;
  }
  return wait / total;
}

const json& result(const json& doc, const std::string& criterion) {
  for (const json& r : doc.at("results"))
    if (r.at("criterion") == criterion) return r;
  ADD_FAILURE() << "no result for " << criterion;
  static const json none;
  return none;
}

json rendered(const Checked& c) { return json::parse(check_json(c.report, c.criteria, "defaults").dump()); }

TEST(CheckJson, CountsAgreeWithTheRows) {
  for (const char* scenario : {"input_bound", "input_fixed"}) {
    const json j = rendered(check(scenario));
    std::map<std::string, std::size_t> verdicts;
    for (const json& r : j.at("results")) ++verdicts[r.at("verdict").get<std::string>()];
    EXPECT_EQ(j.at("failed"), verdicts["fail"]) << scenario;
    EXPECT_EQ(j.at("not_evaluated"), verdicts["not_evaluated"]) << scenario;
    EXPECT_EQ(j.at("passed"), verdicts["fail"] == 0) << scenario;
    EXPECT_EQ(verdicts.size() - verdicts.count("pass") - verdicts.count("fail") - verdicts.count("not_evaluated"), 0u);
    EXPECT_EQ(j.at("criteria_source"), "defaults");
  }
}

TEST(CheckJson, MeasuredValuesAreTheRecordings) {
  const json j = rendered(check("input_bound"));
  EXPECT_EQ(j.at("passed"), false);
  const auto records = steps("input_bound");
  const json& wait = result(j, "max_data_wait_fraction");
  EXPECT_EQ(wait.at("rank"), 0);
  EXPECT_EQ(wait.at("verdict"), "fail");
  EXPECT_NEAR(wait.at("measured").get<double>(), steady_data_wait(records, 2), 1e-9);
  EXPECT_DOUBLE_EQ(wait.at("limit").get<double>(), 0.10);
  // HBM: the highest reserved peak over nvidia-smi's memory.total (143771 MiB on the H200).
  std::uint64_t peak = 0;
  for (const json& r : records) peak = std::max(peak, r["reserved_bytes.all.peak"].get<std::uint64_t>());
  const json& hbm = result(j, "max_hbm_fraction");
  EXPECT_EQ(hbm.at("verdict"), "pass");
  EXPECT_NEAR(hbm.at("measured").get<double>(), static_cast<double>(peak) / (143771.0 * 1024 * 1024), 1e-9);
  const json& idle = result(j, "max_gpu_idle_fraction");
  EXPECT_EQ(idle.at("verdict"), "fail");
  EXPECT_FALSE(idle.contains("rank")) << "a GPU row, not a rank's";
  EXPECT_GT(idle.at("measured").get<double>(), 0.5);  // 93% of each step waits for data

  const json fixed = rendered(check("input_fixed"));
  EXPECT_EQ(result(fixed, "max_data_wait_fraction").at("verdict"), "pass");
  EXPECT_NEAR(result(fixed, "max_data_wait_fraction").at("measured").get<double>(),
              steady_data_wait(steps("input_fixed"), 2), 1e-9);
}

TEST(CheckJson, RowsMirrorTheReportAndCriteriaRoundTrip) {
  AcceptanceCriteria criteria;
  criteria.max_data_wait_fraction = 0.95;
  criteria.required_phases = {"train"};
  criteria.warmup_steps = 3;
  const Checked c = check("input_bound", criteria);
  const json j = rendered(c);
  ASSERT_EQ(j.at("results").size(), c.report.results.size());
  for (std::size_t i = 0; i < c.report.results.size(); ++i) {
    const auto& r = c.report.results[i];
    const json& row = j["results"][i];
    EXPECT_EQ(row.at("criterion"), r.criterion);
    EXPECT_EQ(row.at("subject"), r.subject);
    EXPECT_EQ(row.contains("rank"), r.rank.has_value());
    EXPECT_EQ(row.contains("measured"), r.measured.has_value());
    EXPECT_EQ(row.contains("limit"), r.limit.has_value());
    EXPECT_EQ(row.at("measured_text"), r.measured_text);
    EXPECT_EQ(row.at("detail"), r.detail);
  }
  EXPECT_EQ(result(j, "max_data_wait_fraction").at("verdict"), "pass");  // 92.8% ≤ 95%
  const AcceptanceCriteria back = inputs::parse_acceptance_criteria(j.at("criteria").dump(), "criteria key");
  EXPECT_DOUBLE_EQ(back.max_data_wait_fraction, 0.95);
  EXPECT_EQ(back.required_phases, std::vector<std::string>{"train"});
  EXPECT_EQ(back.warmup_steps, 3);
  EXPECT_DOUBLE_EQ(back.max_hbm_fraction, criteria.max_hbm_fraction);
}

TEST(CheckTable, OneLinePerResultAndTheVerdictCounts) {
  const Checked c = check("input_bound");
  std::ostringstream out;
  write_check_table(out, c.report, "defaults");
  std::vector<std::string> lines;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), c.report.results.size() + 3);  // source, heading, rows, verdict
  EXPECT_NE(lines[0].find("defaults"), std::string::npos);
  for (std::size_t i = 0; i < c.report.results.size(); ++i) {
    const auto& r = c.report.results[i];
    const std::string& line = lines[i + 2];
    EXPECT_NE(line.find(diagnose::criterion_label(r.criterion)), std::string::npos) << line;
    EXPECT_NE(line.find(diagnose::verdict_text(r.verdict)), std::string::npos) << line;
    EXPECT_NE(line.find(r.detail), std::string::npos) << line;
    // The subject is written once, on the first of its rows.
    const bool first_of_subject = i == 0 || c.report.results[i - 1].subject != r.subject;
    EXPECT_EQ(line.rfind(r.subject, 0) == 0, first_of_subject) << line;
  }
  std::smatch m;
  ASSERT_TRUE(std::regex_search(lines.back(), m,
                                std::regex(R"((PASS|FAIL)\D+(\d+) passed\D+(\d+) failed\D+(\d+) not evaluated)")))
      << lines.back();
  EXPECT_EQ(m[1], c.report.passed() ? "PASS" : "FAIL");
  EXPECT_EQ(std::stoul(m[2]), c.report.count(CriterionVerdict::kPass));
  EXPECT_EQ(std::stoul(m[3]), c.report.count(CriterionVerdict::kFail));
  EXPECT_EQ(std::stoul(m[4]), c.report.count(CriterionVerdict::kNotEvaluated));
  EXPECT_EQ(c.report.count(CriterionVerdict::kFail), 5u);  // data wait, both spreads, GPU idle, phases
}

}  // namespace
}  // namespace fragscope::report

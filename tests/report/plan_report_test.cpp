// `plan` output for every example job (examples/*.toml), planned with everything asked
// (proposals, canary, largest fit): the JSON carries the plan's figures key for key, the text
// prints each figure on its own line, and both say the same verdict, proposals and canary.
#include "report/plan_report.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "inputs/acceptance_criteria.h"
#include "report/json_header.h"
#include "util/bytes.h"

namespace fragscope::report {
namespace {

using json = nlohmann::ordered_json;  // the documents keep their keys in order
using plan::JobPlan;
using plan::JobSpec;
using plan::MemoryEstimate;

const std::filesystem::path kExamples = std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "examples";

struct Rendered {
  JobSpec spec;
  JobPlan plan;
  json doc;
  std::string text;
};

Rendered render(const JobSpec& spec, const plan::PlanRequest& request) {
  Rendered r{spec, plan::plan_job(spec, request), {}, {}};
  std::ostringstream json_out, text_out;
  json_out << plan_json(r.spec, r.plan).dump(2);
  write_plan_text(text_out, r.spec, r.plan);
  r.doc = json::parse(json_out.str());
  r.text = text_out.str();
  return r;
}

/// The example planned with every part of the output asked for.
Rendered planned(const std::string& example) {
  plan::PlanRequest request;
  request.propose = true;
  request.canary = true;
  request.largest_fit = true;
  return render(plan::read_job_spec(kExamples / example), request);
}

std::vector<std::string> example_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(kExamples))
    if (entry.path().extension() == ".toml") names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// The index of the first line at or after `from` that starts with `prefix` (lines.size() if none).
std::size_t find_line(const std::vector<std::string>& lines, const std::string& prefix, std::size_t from = 0) {
  for (std::size_t i = from; i < lines.size(); ++i)
    if (lines[i].rfind(prefix, 0) == 0) return i;
  return lines.size();
}

void expect_estimate(const json& j, const MemoryEstimate& e) {
  EXPECT_EQ(j.at("peak_allocated_bytes"), e.peak_allocated_bytes);
  EXPECT_EQ(j.at("peak_reserved_bytes"), e.peak_reserved_bytes);
  EXPECT_EQ(j.at("unconstrained_reserved_bytes"), e.unconstrained_reserved_bytes);
  EXPECT_EQ(j.at("hbm_fraction").get<double>(), e.hbm_fraction());
  EXPECT_EQ(j.at("device_bytes"), e.device_bytes);
  EXPECT_EQ(j.at("usable_bytes"), e.usable_bytes);
  EXPECT_EQ(j.at("fits"), e.fits);
  EXPECT_EQ(j.at("within_hbm_limit"), e.within_hbm_limit);
  EXPECT_EQ(j.at("margin_bytes"), e.margin_bytes);
  EXPECT_EQ(j.at("num_alloc_retries"), e.num_alloc_retries);
  // Moments name their phase and count micro-steps from 1, as the text does.
  EXPECT_EQ(j.at("peak_reserved_at").at("phase"), plan::program_phase_name(e.peak_reserved_at.phase));
  EXPECT_EQ(j.at("peak_reserved_at").at("micro_step"), e.peak_reserved_at.micro_step + 1);
  EXPECT_EQ(j.contains("out_of_memory"), !e.fits);
  if (!e.fits) {
    EXPECT_EQ(j.at("out_of_memory").at("request_bytes"), e.oom_request_bytes);
  }
  // The breakdown: the live roles at the allocated peak, which add up to it, then the two
  // figures outside PyTorch.
  const json& breakdown = j.at("breakdown");
  ASSERT_EQ(breakdown.size(), e.breakdown.size() + 2);
  std::uint64_t sum = 0;
  auto key = breakdown.items().begin();
  for (const auto& item : e.breakdown) {
    EXPECT_EQ(key.key(), item.key);
    EXPECT_EQ(key.value(), item.bytes);
    sum += key.value().get<std::uint64_t>();
    ++key;
  }
  EXPECT_EQ(sum, e.peak_allocated_bytes);
  EXPECT_EQ(breakdown.at("cuda_context"), e.cuda_context_bytes);
  EXPECT_EQ(breakdown.at("nccl_buffers"), e.communication_bytes);
}

void expect_json_carries_the_plan(const Rendered& r) {
  const json& j = r.doc;
  EXPECT_EQ(j.at("schema"), kPlanJsonSchema);
  expect_estimate(j, r.plan.estimate);
  EXPECT_EQ(j.at("verdict"), r.plan.verdict);
  EXPECT_EQ(j.at("exit_status"), r.plan.exit_status);
  ASSERT_EQ(j.at("assumptions").size(), r.plan.assumptions.size());
  for (std::size_t i = 0; i < r.plan.assumptions.size(); ++i) {
    EXPECT_EQ(j["assumptions"][i].at("key"), r.plan.assumptions[i].key);
    EXPECT_EQ(j["assumptions"][i].at("value"), r.plan.assumptions[i].value);
  }
  const json& job = j.at("job");
  EXPECT_EQ(job.at("parameters"), r.spec.model.parameters());
  EXPECT_EQ(job.at("gpu"), r.spec.hardware.gpu);
  EXPECT_EQ(job.at("world_size"), r.spec.parallel.world_size);
  EXPECT_EQ(job.at("global_batch"),
            r.spec.training.micro_batch_size * r.spec.training.grad_accum * r.spec.parallel.world_size);
}

void expect_json_lists_the_proposals_and_the_canary(const Rendered& r) {
  ASSERT_TRUE(r.plan.proposals);
  const plan::ProposalSet& ps = *r.plan.proposals;
  const json& items = r.doc.at("proposals").at("items");
  ASSERT_EQ(items.size(), ps.proposals.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    const plan::Proposal& p = ps.proposals[i];
    EXPECT_EQ(items[i].at("name"), p.name);
    EXPECT_EQ(items[i].at("workable"), p.workable);
    // "within" is exactly a workable change the canary would accept
    EXPECT_EQ(items[i].at("status") == "within", p.workable && p.estimate.within_hbm_limit) << p.name;
    expect_estimate(items[i].at("estimate"), p.estimate);
  }
  if (ps.recommended) {
    EXPECT_EQ(r.doc["proposals"].at("recommended"), *ps.recommended);
  } else {
    EXPECT_TRUE(r.doc["proposals"].at("recommended").is_null());
  }
  ASSERT_TRUE(r.plan.largest);
  const json& largest = r.doc.at("largest_fit");
  EXPECT_EQ(largest.at("micro_batch_size").is_null(), !r.plan.largest->micro_batch_size);
  if (r.plan.largest->micro_batch_size) {
    EXPECT_EQ(largest["micro_batch_size"], *r.plan.largest->micro_batch_size);
    EXPECT_EQ(largest.at("at_micro_batch_size").at("peak_reserved_bytes"),
              r.plan.largest->at_micro_batch->peak_reserved_bytes);
  }
  ASSERT_EQ(r.doc.contains("canary"), r.plan.canary.has_value());
  if (!r.plan.canary) return;
  const plan::CanaryPlan& c = *r.plan.canary;
  const json& canary = r.doc["canary"];
  EXPECT_EQ(canary.at("predicted_peak_reserved_bytes"), c.predicted_peak_reserved_bytes);
  ASSERT_EQ(canary.at("steps").size(), c.steps.size());
  for (std::size_t i = 0; i < c.steps.size(); ++i) EXPECT_EQ(canary["steps"][i].at("title"), c.steps[i].title);
  EXPECT_EQ(canary.at("criteria"), inputs::acceptance_criteria_json(c.criteria));
}

void expect_text_prints_every_figure(const Rendered& r) {
  const MemoryEstimate& e = r.plan.estimate;
  const auto lines = lines_of(r.text);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], "fragscope plan: " + r.spec.source);
  for (const auto& a : r.plan.assumptions)
    EXPECT_NE(r.text.find(a.key + " = " + a.value + ": "), std::string::npos) << a.key;
  // The per-GPU table: one row per role, in the JSON's order, then the totals and the device.
  std::size_t at = find_line(lines, "per GPU at the allocated peak (" + plan::moment_text(e.peak_allocated_at) + "):");
  ASSERT_LT(at, lines.size());
  for (const auto& item : e.breakdown) {
    ++at;
    ASSERT_LT(at, lines.size());
    EXPECT_EQ(lines[at].rfind("  " + std::string(item.key) + " ", 0), 0u) << lines[at];
    EXPECT_NE(lines[at].find(format_bytes(item.bytes)), std::string::npos) << lines[at];
  }
  auto row_says = [&](const std::string& label, std::uint64_t bytes) {
    const std::size_t i = find_line(lines, "  " + label);
    ASSERT_LT(i, lines.size()) << label;
    EXPECT_NE(lines[i].find(format_bytes(bytes)), std::string::npos) << lines[i];
  };
  row_says("= peak allocated", e.peak_allocated_bytes);
  row_says("= peak reserved", e.peak_reserved_bytes);
  row_says("+ CUDA context", e.cuda_context_bytes);
  row_says("device", e.device_bytes);
  EXPECT_EQ(find_line(lines, "  + NCCL buffers") < lines.size(), e.communication_bytes > 0);
  EXPECT_LT(find_line(lines, "verdict: " + r.plan.verdict), lines.size());
}

void expect_text_tables_the_proposals_and_the_canary(const Rendered& r) {
  const auto lines = lines_of(r.text);
  const plan::ProposalSet& ps = *r.plan.proposals;
  std::size_t at = find_line(lines, "  PROPOSAL ");
  ASSERT_LT(at, lines.size());
  for (std::size_t i = 0; i < ps.proposals.size(); ++i) {
    const std::string& row = lines.at(++at);
    EXPECT_EQ(row.substr(0, 2), ps.recommended == i ? "* " : "  ") << row;
    EXPECT_EQ(row.substr(2, ps.proposals[i].name.size()), ps.proposals[i].name);
    EXPECT_NE(row.find(format_bytes(ps.proposals[i].estimate.peak_reserved_bytes)), std::string::npos) << row;
  }
  EXPECT_EQ(lines.at(++at), "recommendation: " + ps.recommendation);
  EXPECT_LT(find_line(lines, "largest that fit within the canary's 90.0%:"), lines.size());
  ASSERT_TRUE(r.plan.canary);
  const plan::CanaryPlan& c = *r.plan.canary;
  at = find_line(lines, "canary plan (");
  ASSERT_LT(at, lines.size());
  for (std::size_t i = 0; i < c.steps.size(); ++i)
    EXPECT_EQ(lines.at(++at), "  " + std::to_string(i + 1) + ". " + c.steps[i].title + ": " + c.steps[i].detail);
  // The criteria block is the criteria file itself: it parses as the JSON's criteria.
  const std::size_t criteria = r.text.find("acceptance criteria:\n");
  ASSERT_NE(criteria, std::string::npos);
  EXPECT_EQ(json::parse(r.text.substr(criteria + 21)), r.doc.at("canary").at("criteria"));
}

class PlanReport : public ::testing::TestWithParam<std::string> {};

// One test per example (planning llama3-8b-mig with everything asked takes seconds), four checks.
TEST_P(PlanReport, JsonAndTextSayThePlan) {
  const Rendered r = planned(GetParam());
  {
    SCOPED_TRACE("the JSON's figures");
    expect_json_carries_the_plan(r);
  }
  {
    SCOPED_TRACE("the JSON's proposals, largest fit and canary");
    expect_json_lists_the_proposals_and_the_canary(r);
  }
  {
    SCOPED_TRACE("the text's figures");
    expect_text_prints_every_figure(r);
  }
  {
    SCOPED_TRACE("the text's proposals and canary");
    expect_text_tables_the_proposals_and_the_canary(r);
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, PlanReport, ::testing::ValuesIn(example_names()), [](const auto& info) {
  std::string name = info.param.substr(0, info.param.size() - 5);
  std::replace_if(
      name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
  return name;
});

TEST(PlanReportNoCanary, NoConfigurationWithinTheLimitsSaysSoInsteadOfACanary) {
  JobSpec huge = plan::read_job_spec(kExamples / "plan_p1.toml");
  huge.model.num_layers = 400;
  huge.hardware.gpu = "L40S";
  plan::PlanRequest request;
  request.propose = true;
  request.canary = true;
  const Rendered r = render(huge, request);
  ASSERT_FALSE(r.plan.canary);
  EXPECT_NE(
      r.text.find("\ncanary plan: none; no configuration is within the limits, so there is nothing to validate\n"),
      std::string::npos);
  EXPECT_FALSE(r.doc.contains("canary"));
  EXPECT_EQ(r.doc.at("exit_status"), 1);
  EXPECT_TRUE(r.doc.at("proposals").at("recommended").is_null());
  EXPECT_EQ(r.doc.at("out_of_memory").at("at").at("micro_step"), r.plan.estimate.oom_at.micro_step + 1);
}

}  // namespace
}  // namespace fragscope::report

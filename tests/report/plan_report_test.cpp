// `plan` output for the recorded plan runs (plan_p1, plan_p2): the JSON's figures add up (the
// breakdown is the peak, the margin is usable − reserved), the job is the recorded one (its
// parameter count as the recorder printed it, the H200's memory as nvidia-smi reported it), and
// the text states the verdict, every part of the peak and the recommended proposal.
#include "report/plan_report.h"

#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../plan/recorded_run.h"
#include "inputs/nvidia_smi_csv.h"
#include "util/bytes.h"

namespace fragscope::report {
namespace {

using nlohmann::json;
using plan::testing::load_recorded_run;
using plan::testing::RecordedRun;

const std::filesystem::path kFixtures = FRAGSCOPE_FIXTURES_DIR;

json rendered(const plan::JobSpec& spec, const plan::MemoryEstimate& e, const plan::ProposalSet* proposals,
              const plan::CanaryPlan* canary) {
  std::ostringstream out;
  write_plan_json(out, spec, e, proposals, canary);
  return json::parse(out.str());
}

std::string text_of(const plan::JobSpec& spec, const plan::MemoryEstimate& e, const plan::ProposalSet* proposals,
                    const plan::CanaryPlan* canary) {
  std::ostringstream out;
  write_plan_text(out, spec, e, proposals, canary);
  return out.str();
}

/// memory.total of the recording's nvidia-smi reading (MiB → bytes).
std::uint64_t smi_memory_total(const std::string& scenario) {
  std::ifstream in(kFixtures / scenario / "smi.csv");
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  std::smatch m;
  EXPECT_TRUE(std::regex_search(row, m, std::regex(R"(, (\d+) MiB, \d+ %)"))) << row;
  return std::stoull(m[1]) * kMiB;
}

class PlanJson : public ::testing::TestWithParam<std::string> {};

TEST_P(PlanJson, FiguresAddUpAndTheJobIsTheRecordedOne) {
  const RecordedRun run = load_recorded_run(kFixtures / GetParam());
  const auto e = plan::estimate_memory(run.spec);
  const json j = rendered(run.spec, e, nullptr, nullptr);
  // The breakdown of the peak phase adds up to the peak; the two outside PyTorch are listed too.
  std::uint64_t in_pytorch = 0;
  for (const auto& [key, bytes] : j.at("breakdown").items())
    if (key != "cuda_context" && key != "communication_buffers") in_pytorch += bytes.get<std::uint64_t>();
  EXPECT_EQ(in_pytorch, j.at("peak_allocated_bytes").get<std::uint64_t>());
  const auto device = j.at("device_bytes").get<std::int64_t>();
  const auto usable = j.at("usable_bytes").get<std::int64_t>();
  const auto reserved = j.at("peak_reserved_bytes").get<std::int64_t>();
  EXPECT_EQ(usable, device - j["breakdown"].at("cuda_context").get<std::int64_t>() -
                        j["breakdown"].at("communication_buffers").get<std::int64_t>());
  EXPECT_EQ(j.at("margin_bytes").get<std::int64_t>(), usable - reserved);
  EXPECT_EQ(j.at("fits"), reserved <= usable);
  EXPECT_EQ(j.at("within_hbm_limit"), reserved <= usable && reserved <= 0.9 * static_cast<double>(device));
  EXPECT_NEAR(static_cast<double>(reserved),
              j["peak_allocated_bytes"].get<double>() * (1 + j.at("headroom_fraction").get<double>()), 1.0);
  // The peak phase is the phase with the most bytes.
  std::uint64_t most = 0;
  std::string most_phase;
  for (const json& p : j.at("phases")) {
    if (p.at("bytes").get<std::uint64_t>() > most) {
      most = p["bytes"].get<std::uint64_t>();
      most_phase = p.at("phase").get<std::string>();
    }
  }
  EXPECT_EQ(j.at("peak_phase"), most_phase);
  EXPECT_EQ(most, j["peak_allocated_bytes"].get<std::uint64_t>());
  // The job: the recorder's own parameter count, the card nvidia-smi reported.
  const json& job = j.at("job");
  EXPECT_EQ(job.at("parameters"), run.params);
  EXPECT_EQ(device, static_cast<std::int64_t>(smi_memory_total(GetParam())));
  EXPECT_EQ(job.at("micro_batch_size"), run.spec.training.micro_batch_size);
  EXPECT_EQ(job.at("grad_accum"), run.spec.training.grad_accum);
  EXPECT_EQ(job.at("seq_len"), run.spec.training.seq_len);
  EXPECT_EQ(job.at("global_batch"), run.spec.training.micro_batch_size * run.spec.training.grad_accum);
  EXPECT_EQ(job.at("checkpointing"), GetParam() == "plan_p2" ? "full" : "none");
  // And the estimate is the recorded run's peak (the model's accuracy: memory_model_test).
  EXPECT_NEAR(j["peak_allocated_bytes"].get<double>(), static_cast<double>(run.max_memory_allocated),
              0.01 * static_cast<double>(run.max_memory_allocated));
  EXPECT_FALSE(j.contains("proposals"));
  EXPECT_FALSE(j.contains("canary"));
}

TEST_P(PlanJson, TextStatesEveryPartOfThePeakAndTheVerdict) {
  const RecordedRun run = load_recorded_run(kFixtures / GetParam());
  const auto e = plan::estimate_memory(run.spec);
  const std::string text = text_of(run.spec, e, nullptr, nullptr);
  for (const auto& item : e.peak.items) {
    std::istringstream in(text);
    bool found = false;
    for (std::string line; std::getline(in, line);)
      found |= line.find(std::string(item.key)) != std::string::npos &&
               line.find(format_bytes(item.bytes)) != std::string::npos;
    EXPECT_TRUE(found) << item.key << " " << format_bytes(item.bytes);
  }
  EXPECT_NE(text.find(format_bytes(e.peak_allocated_bytes)), std::string::npos);
  EXPECT_NE(text.find(e.fits ? "FITS" : "DOES NOT FIT"), std::string::npos);
  EXPECT_NE(text.find(format_bytes(static_cast<std::uint64_t>(e.margin_bytes))), std::string::npos);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(([0-9.]+)% of the device)")));
  EXPECT_NEAR(std::stod(m[1]),
              100.0 * static_cast<double>(e.peak_reserved_bytes + e.cuda_context_bytes + e.communication_bytes) /
                  static_cast<double>(e.device_bytes),
              0.051);
}

INSTANTIATE_TEST_SUITE_P(Recorded, PlanJson, ::testing::Values("plan_p1", "plan_p2"));

TEST(PlanReport, JobThatDoesNotFitGetsProposalsAndACanary) {
  RecordedRun run = load_recorded_run(kFixtures / "plan_p1");
  run.spec.hardware.gpu = "A100-40GB";  // 34.6 GiB allocated at the peak: too much for 40 GB
  const auto e = plan::estimate_memory(run.spec);
  ASSERT_FALSE(e.fits);
  const auto proposals = plan::propose(run.spec, std::nullopt);
  ASSERT_TRUE(proposals.recommended.has_value());
  const auto& best = proposals.proposals[*proposals.recommended];
  const auto canary = plan::canary_plan(best.spec, best.estimate, "criteria.json", best.change);
  const json j = rendered(run.spec, e, &proposals, &canary);
  EXPECT_EQ(j.at("fits"), false);
  EXPECT_EQ(j.at("margin_bytes").get<std::int64_t>(), e.margin_bytes);
  EXPECT_LT(j["margin_bytes"].get<std::int64_t>(), 0);
  const json& p = j.at("proposals");
  EXPECT_EQ(p.at("current_global_batch"), 8);  // micro-batch 4 × grad_accum 2
  ASSERT_EQ(p.at("items").size(), proposals.proposals.size());
  EXPECT_EQ(p.at("recommended"), *proposals.recommended);
  const json& chosen = p["items"][*proposals.recommended];
  EXPECT_EQ(chosen.at("name"), best.name);
  EXPECT_EQ(chosen.at("workable"), true);
  EXPECT_EQ(chosen.at("within_hbm_limit"), true);  // a recommendation must pass the canary's HBM gate
  EXPECT_EQ(chosen.at("estimate").at("peak_reserved_bytes"), best.estimate.peak_reserved_bytes);
  EXPECT_EQ(p.at("recommendation"), proposals.recommendation);
  const json& c = j.at("canary");
  EXPECT_EQ(c.at("steps").size(), canary.steps.size());
  EXPECT_NEAR(c.at("predicted_hbm_fraction").get<double>(),
              static_cast<double>(best.estimate.peak_reserved_bytes) / static_cast<double>(best.estimate.device_bytes),
              0.01);
  const auto criteria = inputs::parse_acceptance_criteria(c.at("criteria").dump(), "canary criteria");
  EXPECT_DOUBLE_EQ(criteria.max_hbm_fraction, canary.criteria.max_hbm_fraction);
  EXPECT_EQ(criteria.required_phases, canary.criteria.required_phases);

  const std::string text = text_of(run.spec, e, &proposals, &canary);
  EXPECT_NE(text.find("DOES NOT FIT"), std::string::npos);
  EXPECT_NE(text.find("short by " + format_bytes(static_cast<std::uint64_t>(-e.margin_bytes))), std::string::npos);
  std::istringstream in(text);
  std::size_t marked = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("* ", 0) != 0) continue;
    ++marked;
    EXPECT_NE(line.find(best.name), std::string::npos) << line;
  }
  EXPECT_EQ(marked, 1u) << "exactly the recommended proposal is marked";
  for (std::size_t i = 0; i < canary.steps.size(); ++i)
    EXPECT_NE(text.find(std::to_string(i + 1) + ". " + canary.steps[i].title), std::string::npos)
        << canary.steps[i].title;
}

}  // namespace
}  // namespace fragscope::report

// `fragscope plan` through the real binary (env FRAGSCOPE_BIN): text, --json keys, exit codes,
// bad input, and the criteria file read back by `fragscope check --criteria`.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../command_runner.h"

namespace {

namespace fs = std::filesystem;
using fragscope::testing::run_fragscope;

const fs::path kExamples = fs::path(FRAGSCOPE_SOURCE_DIR) / "examples";
const fs::path kFixtures = FRAGSCOPE_FIXTURES_DIR;

TEST(PlanCommand, PlanP1FitsAndPredictsTheMeasuredPeak) {
  const auto r = run_fragscope({"plan", (kExamples / "plan_p1.toml").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"peak_allocated_bytes", "peak_reserved_bytes", "device_bytes", "fits", "breakdown"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_TRUE(j.at("fits").get<bool>());
  // truth.json max_memory_allocated = 37142940160.
  EXPECT_NEAR(j.at("peak_allocated_bytes").get<double>(), 37142940160.0, 0.01 * 37142940160.0);
  std::uint64_t sum = 0;
  for (const auto& [key, bytes] : j.at("breakdown").items())
    if (key != "cuda_context" && key != "communication_buffers") sum += bytes.get<std::uint64_t>();
  EXPECT_EQ(sum, j.at("peak_allocated_bytes").get<std::uint64_t>());
}

TEST(PlanCommand, SeedJobDoesNotFitExitsOneAndProposes) {
  const auto r = run_fragscope({"plan", (kExamples / "seed-13b.toml").string(), "--propose"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("DOES NOT FIT"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recommendation: "), std::string::npos);
  EXPECT_NE(r.out.find("global batch 512: grad_accum 32"), std::string::npos);
}

TEST(PlanCommand, BadSpecIsExitTwoWithOneLine) {
  const fs::path bad = fs::temp_directory_path() / "fragscope_plan_bad.toml";
  std::ofstream(bad) << "[model]\npreset = \"llama-2-13b\"\n[training]\nseq_len = 4096\nmicro_batch_size = 2\n"
                        "[hardware]\ngpu = \"A100-80GB\"\nmig = \"3g.71gb\"\n";
  const auto r = run_fragscope({"plan", bad.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("[hardware].mig \"3g.71gb\" is not a MIG profile of A100-80GB"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1);  // one line
  const auto missing = run_fragscope({"plan", "/nonexistent/job.toml"});
  EXPECT_EQ(missing.exit_code, 2);
  fs::remove(bad);
}

TEST(PlanCommand, CriteriaFileIsAcceptedByCheck) {
  const fs::path criteria = fs::temp_directory_path() / "fragscope_plan_criteria.json";
  const auto r = run_fragscope({"plan", (kExamples / "plan_p1.toml").string(), "--canary", "--criteria-out",
                                criteria.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("canary plan"), std::string::npos);
  ASSERT_TRUE(fs::exists(criteria));
  // plan_p1's own telemetry against the plan's criteria: check reads the file (exit 2 would mean
  // it refused it) and fails only on what the 4-step recording lacks (eval/checkpoint phases).
  const auto check = run_fragscope({"check", (kFixtures / "plan_p1" / "steps.jsonl").string(), "--criteria",
                                    criteria.string(), "--json"});
  ASSERT_NE(check.exit_code, 2) << check.err;
  const auto j = nlohmann::json::parse(check.out);
  EXPECT_EQ(j.at("criteria").at("device_memory_bytes").get<std::uint64_t>(), 143771ull * 1024 * 1024);
  bool hbm_passed = false;
  for (const auto& result : j.at("results"))
    if (result.at("criterion") == "max_hbm_fraction") hbm_passed = result.at("verdict") == "pass";
  EXPECT_TRUE(hbm_passed);  // 36.4 GiB reserved of 140.4 GiB
  fs::remove(criteria);
}

}  // namespace

namespace {

// Issue 16: `plan --criteria-out` ignored write errors (a 0-byte file, exit unchanged), and
// `plan /dev/zero` grew to 4.9 GB.
TEST(PlanCommand, OutputAndInputErrorsAreOneLineAndExitTwo) {
  const std::string job = (kExamples / "plan_p1.toml").string();
  auto full = run_fragscope({"plan", job, "--criteria-out", "/dev/full"});
  EXPECT_EQ(full.exit_code, 2);
  EXPECT_EQ(full.err, "fragscope: error: /dev/full: cannot write the criteria file (No space left on device)\n");
  const fs::path copy = fs::temp_directory_path() / "fragscope_plan_onto_input.toml";
  fs::copy_file(job, copy, fs::copy_options::overwrite_existing);
  auto onto = run_fragscope({"plan", copy.string(), "--criteria-out", copy.string()});
  EXPECT_EQ(onto.exit_code, 2);
  EXPECT_EQ(onto.err, "fragscope: error: " + copy.string() + ": refusing to write the criteria file onto an input\n");
  EXPECT_GT(fs::file_size(copy), 100u);
  fs::remove(copy);
  auto zero = run_fragscope({"plan", "/dev/zero"});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_EQ(zero.err, "fragscope: error: /dev/zero: cannot read: is a character device, not a file\n");
  auto batch = run_fragscope({"plan", job, "--global-batch", "9223372036854775807"});
  EXPECT_EQ(batch.exit_code, 2);
  EXPECT_EQ(batch.err,
            "fragscope: error: global batch 9223372036854775807 is beyond 2^40 sequences; not a real training job\n");
}

}  // namespace

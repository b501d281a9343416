// `fragscope replay` and `fragscope whatif` end to end: exit status, JSON keys, error lines.

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <sys/wait.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../fixture_support.h"

namespace fragscope::replay {
namespace {

std::string fixture_path(const std::string& scenario) {
  return (testing::fixtures_dir() / scenario / "snapshot.pickle.zst").string();
}

struct CliRun {
  int status = -1;
  std::string out;
};

/// Runs the fragscope binary with `args`; stderr is folded into out when `with_stderr`.
CliRun fragscope(const std::string& args, bool with_stderr = false) {
  const char* bin = std::getenv("FRAGSCOPE_BIN");
  CliRun run;
  if (!bin) return run;
  const std::string command =
      std::string(bin) + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* pipe = popen(command.c_str(), "r");
  std::array<char, 4096> buffer{};
  while (std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) run.out.append(buffer.data(), n);
  const int raw = pclose(pipe);
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return run;
}

TEST(ReplayCliTest, OomReplayExitsOneWithTheRecordedIndex) {
  const CliRun run = fragscope("replay --json " + fixture_path("frag_oom_104"));
  ASSERT_EQ(run.status, 1) << run.out;
  const auto j = nlohmann::json::parse(run.out);
  const auto truth = testing::read_json(testing::fixtures_dir() / "frag_oom_104" / "truth.json");
  EXPECT_TRUE(j["oom"].get<bool>());
  EXPECT_EQ(j["oom_event_index"], truth["oom_event"]["index"]);
  EXPECT_EQ(j["peak_reserved_bytes"], truth["max_memory_reserved"]);
  EXPECT_EQ(j["num_alloc_retries"], truth["num_alloc_retries"]);
  EXPECT_TRUE(j["ideal_peak_bytes"].is_number());
  EXPECT_TRUE(j["peak_allocated_bytes"].is_number());
  EXPECT_EQ(j["self_check"]["segment_mismatches"], 0);
}

TEST(ReplayCliTest, WhatIfConfigThatSurvivesExitsZero) {
  const CliRun run = fragscope("replay --json --alloc-conf expandable_segments:True " +
                            fixture_path("frag_oom_104"));
  ASSERT_EQ(run.status, 0) << run.out;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_FALSE(j["oom"].get<bool>());
  EXPECT_TRUE(j["oom_event_index"].is_null());
  EXPECT_TRUE(j["passed_recorded_oom"].get<bool>());
}

TEST(ReplayCliTest, TextReportIsShortAndHasATimeline) {
  const CliRun run = fragscope("replay " + fixture_path("fid_default"));
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("peak reserved"), std::string::npos);
  EXPECT_NE(run.out.find("49.23 GiB"), std::string::npos);  // 52865007616 bytes
  EXPECT_NE(run.out.find("exact"), std::string::npos);
  EXPECT_NE(run.out.find("█"), std::string::npos);
  EXPECT_LT(std::count(run.out.begin(), run.out.end(), '\n'), 40);
}

TEST(ReplayCliTest, BadInputExitsTwoWithOneLine) {
  CliRun run = fragscope("replay --alloc-conf max_split_size_mb:5 " + fixture_path("fid_default"), true);
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.out.find("max_split_size_mb"), std::string::npos);
  EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 1) << run.out;
  run = fragscope("replay /nonexistent/snapshot.pickle", true);
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.out.find("/nonexistent/snapshot.pickle"), std::string::npos);
  run = fragscope("replay --gpu Z9000 " + fixture_path("fid_default"), true);
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.out.find("Z9000"), std::string::npos);
  run = fragscope("whatif --capacity lots " + fixture_path("fid_default"), true);
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.out.find("--capacity"), std::string::npos);
}

TEST(ReplayCliTest, WhatIfRecommendsAndBisects) {
  const CliRun run = fragscope("whatif --json --min-capacity " + fixture_path("frag_oom_104"));
  ASSERT_EQ(run.status, 0) << run.out;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["recommended_alloc_conf"], "expandable_segments:True");
  ASSERT_GE(j["configs"].size(), 10u);
  for (const auto& row : j["configs"]) {
    EXPECT_TRUE(row["min_capacity_bytes"].is_number()) << row;
    EXPECT_GE(row["min_capacity_bytes"].get<std::uint64_t>(), j["ideal_peak_bytes"].get<std::uint64_t>());
  }
  const CliRun text = fragscope("whatif " + fixture_path("frag_oom_104"));
  EXPECT_NE(text.out.find("recommended: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
            std::string::npos)
      << text.out;
}

}  // namespace
}  // namespace fragscope::replay

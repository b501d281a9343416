#include "agent/agent.h"

#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/rank_file_writer.h"
#include "agent/rank_selection.h"
#include "test_support.h"

namespace fragscope::agent {
namespace {

using testing::run_python;
using testing::TempDir;

std::string scrape(const Agent& agent) { return *agent.metrics_page().text(); }

class AgentTest : public ::testing::Test {
 protected:
  void write_ranks() {
    // Two live ranks through the hook's writer; rank 1 runs on the GPU whose UUID NVML calls
    // index 1 although its CUDA index is 0 (a container that sees one GPU).
    ASSERT_EQ(run_python(dir_, "DIR = '" + dir_.path().string() + R"('
for rank, split, uuid in ((0, 1_000_000_000, ''), (1, 30_000_000_000, 'GPU-bbbbbbbb-1111-1111-1111-111111111111')):
    shm.RankFileWriter(DIR, shm.RankRecord(pid=100 + rank, rank=rank, gpu=0, gpu_uuid=uuid, job='sft',
        update_unix_ns=time.time_ns(), reserved_bytes=100_000_000_000, inactive_split_bytes=split))
)"),
              0);
  }

  TempDir dir_;
  std::ostringstream events_;
};

TEST_F(AgentTest, PollTurnsRankFilesAndNvmlIntoMetrics) {
  write_ranks();
  AgentOptions options;
  options.rank_dir = dir_.path();
  options.nvml_library = FRAGSCOPE_FAKE_NVML;
  Agent agent(options, AgentConfig{}, events_);
  agent.poll();
  const std::string text = scrape(agent);
  const std::string uid = std::to_string(::geteuid());
  EXPECT_NE(text.find("fragscope_nvml_up 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(fragscope_fragmentation_ratio{training_job="sft",rank="0",gpu="0",uid=")" + uid + "\"} 0.01"),
            std::string::npos);
  EXPECT_NE(text.find(R"(fragscope_fragmentation_ratio{training_job="sft",rank="1",gpu="1",uid=")" + uid + "\"} 0.3"),
            std::string::npos);
  EXPECT_NE(text.find(R"(fragscope_gpu_memory_used_bytes{gpu="0"} 140000000000)"), std::string::npos);
  EXPECT_NE(text.find(R"(fragscope_rank_files{state="ok"} 2)"), std::string::npos);
  EXPECT_NE(events_.str().find("\"nvml_up\":true"), std::string::npos) << events_.str();
}

TEST_F(AgentTest, FiringRuleRequestsACheckpointFromTheRightRank) {
  write_ranks();
  AgentOptions options;
  options.rank_dir = dir_.path();
  options.nvml_library = "libnvidia-ml-missing.so.1";
  AgentConfig config;
  config.thresholds.hold_for = std::chrono::seconds(0);
  config.actions.checkpoint.enabled = true;
  Agent agent(options, config, events_);
  agent.poll();
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "rank0-pid100.fsr.checkpoint"));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "rank1-pid101.fsr.checkpoint"));
  const std::string text = scrape(agent);
  EXPECT_NE(text.find("fragscope_nvml_up 0\n"), std::string::npos);
  EXPECT_NE(text.find(R"(fragscope_agent_alerts{rule="fragmentation"} 1)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(fragscope_agent_actions_total{action="checkpoint",outcome="executed"} 1)"), std::string::npos);
}

TEST_F(AgentTest, RunPollsEveryIntervalUntilStopped) {
  AgentOptions options;
  options.rank_dir = dir_.path();
  options.listen = "127.0.0.1:0";
  options.poll_interval = std::chrono::milliseconds(20);
  Agent agent(options, AgentConfig{}, events_);
  std::atomic<bool> stop{false};
  std::thread runner([&] { agent.run(stop); });
  auto polls = [&] {
    const std::string text = scrape(agent);
    const std::string key = "\nfragscope_agent_polls_total ";
    const auto at = text.find(key);
    return at == std::string::npos ? 0.0 : std::stod(text.substr(at + key.size()));
  };
  for (int i = 0; i < 500 && polls() < 5; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  stop = true;
  runner.join();
  EXPECT_GE(polls(), 5);
  const std::string events = events_.str();
  EXPECT_NE(events.find("\"event\":\"listening\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"event\":\"stop\""), std::string::npos) << events;
}

TEST_F(AgentTest, BrokenAndStaleFilesAreLoggedOnceNotEveryPoll) {
  ASSERT_EQ(run_python(dir_, "shm.RankFileWriter('" + dir_.path().string() +
                                 "', shm.RankRecord(pid=7, rank=7, update_unix_ns=time.time_ns() - 3600 * 10**9))\n"),
            0);
  std::ofstream(dir_.path() / "rank9-pid9.fsr") << "junk";
  AgentOptions options;
  options.rank_dir = dir_.path();
  options.nvml_library = "libnvidia-ml-missing.so.1";
  Agent agent(options, AgentConfig{}, events_);
  agent.poll();
  agent.poll();
  std::vector<nlohmann::json> logged;
  std::istringstream lines(events_.str());
  for (std::string line; std::getline(lines, line);) {
    auto event = nlohmann::json::parse(line);
    if (event["event"] == "rank_file") logged.push_back(event);
  }
  ASSERT_EQ(logged.size(), 2u) << events_.str();
  EXPECT_EQ(logged[0]["file"], "rank7-pid7.fsr");
  EXPECT_EQ(logged[0]["state"], "stale");
  EXPECT_EQ(logged[0]["problem"].get<std::string>().rfind("no update for 360", 0), 0u);
  EXPECT_EQ(logged[1]["file"], "rank9-pid9.fsr");
  EXPECT_EQ(logged[1]["state"], "invalid");
  EXPECT_EQ(logged[1]["problem"], "truncated: 4 bytes, the header alone is 32");
}

// Audit: 4,096 forged rank files were all exported (a 16 MB page, 128 MB of agent). Past the
// per-owner cap the rest is counted, and said once in the event log, not at every poll.
TEST_F(AgentTest, RanksOverTheCapAreCountedAndLoggedOnce) {
  std::vector<std::unique_ptr<RankFileWriter>> ranks;
  for (int i = 0; i < static_cast<int>(kMaxRanksPerOwner) + 88; ++i) {
    RankRecord record;
    record.rank = i;
    record.pid = 1000 + i;
    record.job = "flood";
    record.update_unix_ns = testing::unix_ns_now();
    ranks.push_back(std::make_unique<RankFileWriter>(dir_.path() / ("rank" + std::to_string(i) + "-pid" +
                                                                     std::to_string(1000 + i) + ".fsr"),
                                                     record));
  }
  AgentOptions options;
  options.rank_dir = dir_.path();
  options.nvml_library = "libnvidia-ml-missing.so.1";
  Agent agent(options, AgentConfig{}, events_);
  agent.poll();
  agent.poll();
  const std::string text = scrape(agent);
  EXPECT_NE(text.find("\nfragscope_ranks_dropped 88\n"), std::string::npos) << text.substr(text.size() - 3000);
  EXPECT_NE(text.find("fragscope_rank_files{state=\"ok\"} 600\n"), std::string::npos);
  std::vector<nlohmann::json> logged;
  std::istringstream lines(events_.str());
  for (std::string line; std::getline(lines, line);) {
    auto event = nlohmann::json::parse(line);
    if (event["event"] == "ranks_dropped") logged.push_back(event);
  }
  ASSERT_EQ(logged.size(), 1u) << events_.str();
  EXPECT_EQ(logged[0]["dropped"], 88);
  EXPECT_EQ(logged[0]["owners"], nlohmann::json::array({::geteuid()}));
  ranks.resize(10);
  agent.poll();
  EXPECT_NE(events_.str().find("every live rank is tracked again"), std::string::npos);
}

}  // namespace
}  // namespace fragscope::agent

#include "agent/agent.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/event_log.h"
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

std::set<int> open_descriptors() {
  std::set<int> fds;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    fds.insert(std::stoi(entry.path().filename()));
  }
  std::erase_if(fds, [](int fd) { return ::fcntl(fd, F_GETFD) < 0; });  // the listing's own, closed by now
  return fds;
}

/// The JSON-lines events read from `lines`, in order; with `name`, only those whose "event" is it.
std::vector<nlohmann::json> events_from(std::istream&& lines, std::string_view name = {}) {
  std::vector<nlohmann::json> events;
  for (std::string line; std::getline(lines, line);) {
    auto event = nlohmann::json::parse(line);
    if (name.empty() || event["event"] == name) events.push_back(std::move(event));
  }
  return events;
}

std::vector<nlohmann::json> events_in(const std::filesystem::path& log) { return events_from(std::ifstream(log)); }

// Audit: the drain command could inherit the event log (an std::ofstream, no close-on-exec). Here
// the agent runs as deployed, with its event log, listening socket and a client's connection
// open, and drains on NVML's full GPU 0; the test lists what the drain command holds.
TEST_F(AgentTest, TheDrainCommandInheritsNoneOfTheAgentsDescriptors) {
  const TempDir logs;
  const auto log = logs.path() / "events.jsonl";
  AgentOptions options;
  options.rank_dir = dir_.path();
  options.listen = "127.0.0.1:0";
  options.poll_interval = std::chrono::milliseconds(20);
  options.nvml_library = FRAGSCOPE_FAKE_NVML;
  AgentConfig config;
  config.thresholds.hold_for = std::chrono::seconds(1);  // time for the client to connect first
  config.actions.drain.enabled = true;
  config.actions.drain_command = {"sleep", "30"};
  const std::set<int> before = open_descriptors();
  EventLogFile events(log);
  Agent agent(options, config, events);
  std::atomic<bool> stop{false};
  std::thread runner([&] { agent.run(stop); });
  const auto logged = [&](const std::string& kind) {
    std::optional<nlohmann::json> found;
    for (int i = 0; i < 500 && !found; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      for (const auto& event : events_in(log)) {
        if (event["event"] == kind && (kind != "action" || event["action"] == "drain")) found = event;
      }
    }
    return found;
  };
  const auto listening = logged("listening");
  ASSERT_TRUE(listening);
  // A client that connects and says nothing yet: the server holds its socket for the head timeout.
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons((*listening)["port"].get<std::uint16_t>());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(client, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  const auto drain = logged("action");
  ASSERT_TRUE(drain) << "the drain never ran";
  ASSERT_EQ((*drain)["outcome"], "executed") << *drain;
  // "started sleep 30 (pid N)": posix_spawnp returns once the command is exec'd, but the dynamic loader then
  // runs in N and holds the libraries it maps open for a moment (fd 3 -> libc.so.6 under load). Once `sleep` is
  // asleep ('S' in /proc/N/stat) the loader is done: what N holds then is what it inherited.
  const std::string detail = (*drain)["detail"];
  const pid_t drain_pid = std::stoi(detail.substr(detail.rfind(' ') + 1));
  const auto asleep = [&] {
    std::ifstream stat("/proc/" + std::to_string(drain_pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    return line.size() > line.rfind(')') + 2 && line[line.rfind(')') + 2] == 'S';
  };
  for (int i = 0; i < 500 && !asleep(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(asleep()) << "the drain command never went to sleep";
  std::string inherited;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(drain_pid) + "/fd")) {
    std::error_code gone;
    const int fd = std::stoi(entry.path().filename());
    if (fd > 2) inherited += std::to_string(fd) + " -> " + std::filesystem::read_symlink(entry, gone).string() + "\n";
  }
  EXPECT_EQ(inherited, "") << "the drain holds more than stdin, stdout and stderr";
  // And every descriptor the agent opened is close-on-exec, whatever the spawn closes.
  std::size_t agents = 0;
  for (const int fd : open_descriptors()) {
    const int flags = ::fcntl(fd, F_GETFD);
    if (before.contains(fd) || fd == client || flags < 0) continue;  // the test's own, or closed since listed
    ++agents;
    std::error_code gone;
    EXPECT_NE(flags & FD_CLOEXEC, 0) << "fd " << fd << " -> "
                                     << std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd), gone);
  }
  EXPECT_GE(agents, 5u);  // the event log, the listening socket, the connection, the server's wake pipe
  ::kill(drain_pid, SIGKILL);
  stop = true;
  runner.join();
  ::close(client);
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
  const std::vector<nlohmann::json> logged = events_from(std::istringstream(events_.str()), "rank_file");
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
  const std::vector<nlohmann::json> logged = events_from(std::istringstream(events_.str()), "ranks_dropped");
  ASSERT_EQ(logged.size(), 1u) << events_.str();
  EXPECT_EQ(logged[0]["dropped"], 88);
  EXPECT_EQ(logged[0]["owners"], nlohmann::json::array({::geteuid()}));
  ranks.resize(10);
  agent.poll();
  EXPECT_NE(events_.str().find("every live rank is tracked again"), std::string::npos);
}

// Review: 64 per-user folders of 1,024 rank files each took the agent to 139 MB and a 1.9 s poll. Past the scan's
// readings the rest is counted, and said once in the event log while the flood goes on and grows.
TEST_F(AgentTest, AFloodOfFoldersPastTheScansReadingsIsCountedAndLoggedOnce) {
  for (uid_t uid = 5000; uid < 5040; ++uid) testing::make_flooded_folder(dir_.path(), uid, 64);
  AgentOptions options;
  options.rank_dir = dir_.path();
  options.nvml_library = "libnvidia-ml-missing.so.1";
  Agent agent(options, AgentConfig{}, events_);
  agent.poll();
  EXPECT_NE(scrape(agent).find("\nfragscope_rank_files_unread 512\n"), std::string::npos);
  testing::make_flooded_folder(dir_.path(), 5040, 64);
  agent.poll();
  EXPECT_NE(scrape(agent).find("\nfragscope_rank_files_unread 576\n"), std::string::npos);
  const std::vector<nlohmann::json> logged = events_from(std::istringstream(events_.str()), "rank_dir_warning");
  ASSERT_EQ(logged.size(), 1u) << events_.str();
  EXPECT_EQ(logged[0]["warning"],
            dir_.path().string() +
                ": more than 2048 rank files in all its folders, each poll reads a fair share of each folder's newest");
}

}  // namespace
}  // namespace fragscope::agent

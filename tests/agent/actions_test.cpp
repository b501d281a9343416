#include "agent/actions.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/rank_file_reader.h"
#include "test_support.h"

namespace fragscope::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::TempDir;

std::vector<nlohmann::json> events_of(const std::ostringstream& out) {
  std::vector<nlohmann::json> events;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) events.push_back(nlohmann::json::parse(line));
  return events;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

class ActionDispatcherTest : public ::testing::Test {
 protected:
  ActionDispatcherTest() {
    RankView rank;
    rank.file_name = "rank3-pid77.fsr";
    rank.gpu = 1;
    rank.record.rank = 3;
    rank.record.pid = 77;
    rank.record.job = "llama";
    rank.record.step = 40;
    rank.owner_uid = 1000;
    rank.owner_gid = 1000;
    view_.ranks.push_back(rank);
    alert_.rule = Rule::kFragmentation;
    alert_.value = 0.31;
    alert_.threshold = 0.25;
    alert_.gpu = 1;
    alert_.rank = rank;
    alert_.target = rank.file_name;
    settings_.checkpoint.enabled = true;
  }

  std::vector<std::string> checkpoint_files() const {
    return scan_rank_directory(dir_.path(), testing::unix_ns_now(), seconds(60)).checkpoint_files;
  }

  void wait_for_drain_exit(ActionDispatcher& actions) {
    for (int i = 0; i < 200 && events_.str().find("drain_exit") == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      actions.reap(t0_);
    }
  }

  TempDir dir_;
  NodeView view_;
  Alert alert_;
  ActionSettings settings_;
  std::ostringstream events_;
  const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

TEST_F(ActionDispatcherTest, LogsAndRequestsACheckpointThroughTheFlagFile) {
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  EXPECT_EQ(read_file(dir_.path() / "rank3-pid77.fsr.checkpoint"), "1\n");
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "rank3-pid77.fsr.checkpoint.tmp"));
  const auto events = events_of(events_);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["action"], "log");
  EXPECT_EQ(events[0]["rule"], "fragmentation");
  EXPECT_EQ(events[0]["rank"], 3);
  EXPECT_EQ(events[0]["job"], "llama");
  EXPECT_DOUBLE_EQ(events[0]["value"].get<double>(), 0.31);
  EXPECT_EQ(events[1]["action"], "checkpoint");
  EXPECT_EQ(events[1]["outcome"], "executed");
  EXPECT_EQ(actions.count(ActionKind::kCheckpoint, ActionOutcome::kExecuted), 1u);
}

TEST_F(ActionDispatcherTest, RequestsOfGoneRanksAreRemovedOthersKept) {
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  std::ofstream(dir_.path() / "rank5-pid90.fsr.checkpoint.tmp") << "2\n";  // a rename that never happened
  std::ofstream(dir_.path() / "notes.txt") << "not ours\n";
  actions.remove_requests_of_gone_ranks({"rank3-pid77.fsr"}, checkpoint_files());
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "rank3-pid77.fsr.checkpoint"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "rank5-pid90.fsr.checkpoint.tmp"));
  actions.remove_requests_of_gone_ranks({}, checkpoint_files());  // rank 3 died (or went stale)
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "rank3-pid77.fsr.checkpoint"));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "notes.txt"));
  const auto events = events_of(events_);
  ASSERT_EQ(events.size(), 4u);  // log, checkpoint, two removals
  EXPECT_EQ(events[3]["event"], "checkpoint_request_removed");
  EXPECT_EQ(events[3]["path"], (dir_.path() / "rank3-pid77.fsr.checkpoint").string());
}

// A user who makes requests beside no rank file faster than the polls remove them gets ten lines a poll in the
// event log, then one with the count, not a line per file.
TEST_F(ActionDispatcherTest, RemovalsOfManyRequestsAreLoggedAsACount) {
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  for (int i = 0; i < 50; ++i) std::ofstream(dir_.path() / fmt::format("rank{}-pid9.fsr.checkpoint", i)) << "1\n";
  actions.remove_requests_of_gone_ranks({}, checkpoint_files());
  EXPECT_TRUE(checkpoint_files().empty());
  const auto events = events_of(events_);
  ASSERT_EQ(events.size(), 11u);
  EXPECT_EQ(events[9]["event"], "checkpoint_request_removed");
  EXPECT_TRUE(events[9].contains("path"));
  EXPECT_EQ(events[10]["more_files"], 40);
}

// CI run 28: rank 1 of agent_e2e missed its heartbeats for a moment under load, its request was
// removed as a gone rank's, and the 600 s rate limit kept it from being asked again.
TEST_F(ActionDispatcherTest, ARankBackFromStaleIsAskedAgain) {
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  actions.remove_requests_of_gone_ranks({}, checkpoint_files());  // stale for one poll
  ASSERT_FALSE(std::filesystem::exists(dir_.path() / "rank3-pid77.fsr.checkpoint"));
  actions.dispatch({alert_}, view_, t0_ + seconds(1));  // back, still fragmented
  EXPECT_EQ(read_file(dir_.path() / "rank3-pid77.fsr.checkpoint"), "1\n");
  EXPECT_EQ(actions.count(ActionKind::kCheckpoint, ActionOutcome::kExecuted), 2u);
  EXPECT_EQ(actions.count(ActionKind::kCheckpoint, ActionOutcome::kRateLimited), 0u);
}

// Audit: every target name that ever fired stayed in the rate limiters (and request ids and
// written files in their maps): 40 rounds of 500 new file names took 28 MB with no rank left.
TEST_F(ActionDispatcherTest, TargetsThatCameAndWentAreForgotten) {
  settings_.checkpoint.min_interval = seconds(3600);
  settings_.log.min_interval = seconds(3600);
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  const std::string long_pid(150, '7');  // long names, still a rank file's (digits)
  for (int round = 0; round < 40; ++round) {
    NodeView view;
    std::vector<Alert> alerts;
    for (int i = 0; i < 500; ++i) {
      RankView rank = view_.ranks[0];
      rank.file_name = "rank" + std::to_string(round * 500 + i) + "-pid" + long_pid + ".fsr";
      view.ranks.push_back(rank);
      Alert alert = alert_;
      alert.rank = rank;
      alert.target = rank.file_name;
      alerts.push_back(alert);
    }
    actions.dispatch(alerts, view, t0_ + seconds(round));
    actions.remove_requests_of_gone_ranks({}, checkpoint_files());  // renamed away before the next poll
  }
  EXPECT_LE(actions.remembered(), kMaxRateLimitKeys + 500);
  EXPECT_EQ(actions.count(ActionKind::kLog, ActionOutcome::kExecuted), 20'000u);
}

// Issue 16: with checkpoints off, the agent still deleted orphaned requests.
TEST_F(ActionDispatcherTest, NothingIsRemovedWithoutTheCheckpointOptIn) {
  std::ofstream(dir_.path() / "rank5-pid90.fsr.checkpoint") << "2\n";
  for (bool dry_run : {false, true}) {
    settings_.checkpoint.enabled = dry_run;
    settings_.checkpoint.dry_run = dry_run;
    ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
    actions.remove_requests_of_gone_ranks({}, checkpoint_files());
    EXPECT_TRUE(std::filesystem::exists(dir_.path() / "rank5-pid90.fsr.checkpoint")) << dry_run;
  }
}

TEST_F(ActionDispatcherTest, OnlyRequestsOfTheAgentOrTheFoldersOwnerAreRemoved) {
  // At the top level: another user's file and a link are kept, and the link's target untouched.
  std::ofstream(dir_.path() / "rank5-pid90.fsr.checkpoint") << "2\n";
  ASSERT_EQ(::chown((dir_.path() / "rank5-pid90.fsr.checkpoint").c_str(), 4242, 4242), 0);
  std::ofstream(dir_.path() / "victim") << "precious\n";
  std::filesystem::create_symlink(dir_.path() / "victim", dir_.path() / "rank6-pid91.fsr.checkpoint");
  // In a per-user folder: the owner's request is removed, another user's kept.
  const auto folder = dir_.path() / "1000";
  std::filesystem::create_directory(folder);
  ASSERT_EQ(::chown(folder.c_str(), 1000, 1000), 0);
  std::ofstream(folder / "rank1-pid5.fsr.checkpoint") << "1\n";
  ASSERT_EQ(::chown((folder / "rank1-pid5.fsr.checkpoint").c_str(), 1000, 1000), 0);
  std::ofstream(folder / "rank2-pid6.fsr.checkpoint") << "1\n";
  ASSERT_EQ(::chown((folder / "rank2-pid6.fsr.checkpoint").c_str(), 4242, 4242), 0);
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.remove_requests_of_gone_ranks({}, checkpoint_files());
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "rank5-pid90.fsr.checkpoint"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir_.path() / "rank6-pid91.fsr.checkpoint"));
  EXPECT_EQ(read_file(dir_.path() / "victim"), "precious\n");
  EXPECT_FALSE(std::filesystem::exists(folder / "rank1-pid5.fsr.checkpoint"));
  EXPECT_TRUE(std::filesystem::exists(folder / "rank2-pid6.fsr.checkpoint"));
}

// Issue 16: the temp file of a checkpoint request followed a planted link.
TEST_F(ActionDispatcherTest, ACheckpointRequestNeverFollowsAPlantedLink) {
  std::ofstream(dir_.path() / "victim") << "precious\n";
  std::ofstream(dir_.path() / "victim2") << "precious\n";
  std::filesystem::create_symlink(dir_.path() / "victim", dir_.path() / "rank3-pid77.fsr.checkpoint.tmp");
  std::filesystem::create_symlink(dir_.path() / "victim2", dir_.path() / "rank3-pid77.fsr.checkpoint");
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  EXPECT_EQ(read_file(dir_.path() / "victim"), "precious\n");
  EXPECT_EQ(read_file(dir_.path() / "victim2"), "precious\n");
  const auto flag = dir_.path() / "rank3-pid77.fsr.checkpoint";
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(flag)));
  EXPECT_EQ(read_file(flag), "1\n");
  struct stat info {};
  ASSERT_EQ(::lstat(flag.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0600u);  // private, and handed to the rank's owner
  EXPECT_EQ(info.st_uid, 1000u);
  EXPECT_EQ(info.st_gid, 1000u);
  EXPECT_EQ(actions.count(ActionKind::kCheckpoint, ActionOutcome::kExecuted), 1u);
}

TEST_F(ActionDispatcherTest, ARequestGoesIntoTheRanksOwnFolder) {
  const auto folder = dir_.path() / "1000";
  std::filesystem::create_directory(folder);
  ASSERT_EQ(::chown(folder.c_str(), 1000, 1000), 0);
  alert_.rank->file_name = "1000/rank3-pid77.fsr";
  alert_.target = alert_.rank->file_name;
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  EXPECT_EQ(read_file(folder / "rank3-pid77.fsr.checkpoint"), "1\n");
  // A folder whose owner does not match its name gets nothing.
  ASSERT_EQ(::chown(folder.c_str(), 1001, 1001), 0);
  actions.dispatch({alert_}, view_, t0_ + seconds(600));
  EXPECT_EQ(actions.count(ActionKind::kCheckpoint, ActionOutcome::kFailed), 1u);
  EXPECT_EQ(events_of(events_).back()["detail"],
            "cannot open the folder of 1000/rank3-pid77.fsr: 1000: owned by uid 1001, not by the uid its name states");
}

TEST_F(ActionDispatcherTest, RateLimitsPerTargetAndNumbersRequestsPastTheAck) {
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  actions.dispatch({alert_}, view_, t0_ + seconds(59));  // log: 60 s, checkpoint: 600 s
  EXPECT_EQ(actions.count(ActionKind::kLog, ActionOutcome::kExecuted), 1u);
  EXPECT_EQ(actions.count(ActionKind::kLog, ActionOutcome::kRateLimited), 1u);
  EXPECT_EQ(actions.count(ActionKind::kCheckpoint, ActionOutcome::kRateLimited), 1u);
  // The rank acknowledged request 5 in the meantime (e.g. an earlier agent's); the next is 6.
  alert_.rank->record.checkpoint_ack = 5;
  actions.dispatch({alert_}, view_, t0_ + seconds(600));
  EXPECT_EQ(read_file(dir_.path() / "rank3-pid77.fsr.checkpoint"), "6\n");
  EXPECT_EQ(actions.count(ActionKind::kCheckpoint, ActionOutcome::kExecuted), 2u);
}

TEST_F(ActionDispatcherTest, GpuAlertAsksEveryRankOnThatGpu) {
  alert_.rule = Rule::kHbmUsed;
  alert_.rank.reset();
  alert_.target = "gpu1";
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  EXPECT_EQ(read_file(dir_.path() / "rank3-pid77.fsr.checkpoint"), "1\n");
  alert_.gpu = 2;  // no rank there
  alert_.target = "gpu2";
  actions.dispatch({alert_}, view_, t0_);
  EXPECT_EQ(actions.count(ActionKind::kCheckpoint, ActionOutcome::kFailed), 1u);
}

TEST_F(ActionDispatcherTest, DryRunLogsWhatWouldHappenAndTouchesNothing) {
  settings_.dry_run = true;
  settings_.drain.enabled = true;
  settings_.drain.rules = {Rule::kFragmentation};
  settings_.drain_on_rank_files = true;
  settings_.drain_command = {"touch", (dir_.path() / "drained").string()};
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "rank3-pid77.fsr.checkpoint"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "drained"));
  const auto events = events_of(events_);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1]["outcome"], "dry_run");
  EXPECT_EQ(events[2]["outcome"], "dry_run");
  EXPECT_EQ(events[2]["detail"], "would run: touch " + (dir_.path() / "drained").string());
}

TEST_F(ActionDispatcherTest, DryRunDrainLogsTheCommandWithItsPlaceholdersReplaced) {
  settings_.checkpoint.enabled = false;
  settings_.drain.enabled = true;
  settings_.drain.dry_run = true;
  settings_.drain.rules = {Rule::kFragmentation};
  settings_.drain_on_rank_files = true;
  settings_.drain_command = {"kubectl", "drain", "{node}", "--reason={rule} on rank {rank} of {job}"};
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  const auto events = events_of(events_);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1]["detail"], "would run: kubectl drain node-a --reason=fragmentation on rank 3 of llama");
}

// The dry run checks the substituted values as the real run does: it says what would be refused.
TEST_F(ActionDispatcherTest, DryRunDrainSaysWhichValueWouldBeRefused) {
  settings_.checkpoint.enabled = false;
  settings_.drain.enabled = true;
  settings_.drain.dry_run = true;
  settings_.drain.rules = {Rule::kFragmentation};
  settings_.drain_on_rank_files = true;
  settings_.drain_command = {"kubectl", "drain", "{node}", "--reason={job}"};
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  alert_.rank->record.job = "--force";
  actions.dispatch({alert_}, view_, t0_);
  const auto events = events_of(events_);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1]["outcome"], "dry_run");
  EXPECT_EQ(events[1]["detail"],
            "would refuse: {job} would be '--force' (allowed: up to 128 letters, digits, '.', '_', '+', '-', "
            "starting with a letter or digit)");
}

TEST_F(ActionDispatcherTest, PerActionDryRunLeavesTheOtherActionLive) {
  settings_.drain.enabled = true;
  settings_.drain.dry_run = true;
  settings_.drain.rules = {Rule::kFragmentation};
  settings_.drain_on_rank_files = true;
  settings_.drain_command = {"touch", (dir_.path() / "drained").string()};
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "rank3-pid77.fsr.checkpoint"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "drained"));
  EXPECT_EQ(actions.count(ActionKind::kCheckpoint, ActionOutcome::kExecuted), 1u);
  EXPECT_EQ(actions.count(ActionKind::kDrain, ActionOutcome::kDryRun), 1u);
}

TEST_F(ActionDispatcherTest, DrainRunsArgvWithoutAShellAndLogsItsExit) {
  settings_.checkpoint.enabled = false;
  settings_.drain.enabled = true;
  settings_.drain.rules = {Rule::kFragmentation};
  settings_.drain_on_rank_files = true;
  // A shell would run `touch x; touch y`; argv makes it one odd file name.
  settings_.drain_command = {"touch", (dir_.path() / "drained-{node}-{rule}-{rank}-{gpu}-{job}").string(),
                             (dir_.path() / "a; touch b").string()};
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  wait_for_drain_exit(actions);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "drained-node-a-fragmentation-3-1-llama"));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "a; touch b"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "b"));
  const auto events = events_of(events_);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1]["action"], "drain");
  EXPECT_EQ(events[1]["outcome"], "executed");
  EXPECT_EQ(events[2]["event"], "drain_exit");
  EXPECT_EQ(events[2]["exit_status"], 0);
}

// Issue 16: a rank file's job of "../../x" made the drain command write outside its folder.
TEST_F(ActionDispatcherTest, DrainRefusesPlaceholderValuesThatAreNotPlainNames) {
  settings_.checkpoint.enabled = false;
  settings_.drain.enabled = true;
  settings_.drain.rules = {Rule::kFragmentation};
  settings_.drain.min_interval = seconds(0);
  settings_.drain_on_rank_files = true;
  std::filesystem::create_directories(dir_.path() / "jobs" / "x");
  settings_.drain_command = {"touch", (dir_.path() / "jobs" / "x" / "{job}").string()};
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  alert_.rank->record.job = "../../escaped";
  actions.dispatch({alert_}, view_, t0_);
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "escaped"));
  EXPECT_EQ(events_of(events_).back()["detail"],
            "refused: {job} would be '../../escaped' (allowed: up to 128 letters, digits, '.', '_', '+', '-', "
            "starting with a letter or digit)");
  alert_.rank->record.job = "--reference=/etc/shadow";  // an option, not a name
  actions.dispatch({alert_}, view_, t0_ + seconds(1));
  EXPECT_EQ(actions.count(ActionKind::kDrain, ActionOutcome::kFailed), 2u);
  alert_.rank->record.job = "llama-7b_sft.v2";
  actions.dispatch({alert_}, view_, t0_ + seconds(2));
  wait_for_drain_exit(actions);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "jobs" / "x" / "llama-7b_sft.v2"));
  EXPECT_EQ(actions.count(ActionKind::kDrain, ActionOutcome::kExecuted), 1u);
}

// Audit: the drain command inherited the agent's descriptors (the event log among them), and one
// that hung kept every later drain "still running" for good.
TEST_F(ActionDispatcherTest, DrainGetsNoDescriptorOfTheAgentsAndAHungOneIsKilledWithItsGroup) {
  settings_.checkpoint.enabled = false;
  settings_.drain.enabled = true;
  settings_.drain.rules = {Rule::kFragmentation};
  settings_.drain.min_interval = seconds(0);
  settings_.drain_on_rank_files = true;
  const auto leaked = dir_.path() / "event-log";
  const int fd = ::open(leaked.c_str(), O_WRONLY | O_CREAT, 0600);  // no O_CLOEXEC, as std::ofstream opens
  ASSERT_GE(fd, 0);
  const auto fds = dir_.path() / "fds";
  const auto child = dir_.path() / "child";
  settings_.drain_command = {"sh", "-c",
                             "ls -l /proc/$$/fd > " + fds.string() + "; sleep 300 & echo $! > " + child.string() +
                                 "; wait"};
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  for (int i = 0; i < 200 && !std::filesystem::exists(child); ++i) std::this_thread::sleep_for(milliseconds(10));
  std::this_thread::sleep_for(milliseconds(50));
  ::close(fd);
  EXPECT_EQ(read_file(fds).find(leaked.string()), std::string::npos) << read_file(fds);
  const pid_t sleeper = std::stoi(read_file(child));
  actions.dispatch({alert_}, view_, t0_ + seconds(1));
  EXPECT_EQ(events_of(events_).back()["detail"].get<std::string>().rfind("drain command still running", 0), 0u);
  actions.reap(t0_ + settings_.drain_timeout + seconds(1));
  EXPECT_EQ(events_of(events_).back()["event"], "drain_timeout");
  for (int i = 0; i < 200 && events_.str().find("drain_exit") == std::string::npos; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    actions.reap(t0_ + settings_.drain_timeout + seconds(2));
  }
  EXPECT_EQ(events_of(events_).back()["signal"], SIGKILL);
  // The command's own child went with it (dead, or a zombie its new parent has yet to collect).
  std::this_thread::sleep_for(milliseconds(50));
  std::ifstream stat("/proc/" + std::to_string(sleeper) + "/stat");
  std::string pid, name, state;
  stat >> pid >> name >> state;
  EXPECT_TRUE(!stat || state == "Z") << state;
  // And the next drain runs (and is stopped the same way).
  const auto later = t0_ + settings_.drain_timeout + seconds(3);
  actions.dispatch({alert_}, view_, later);
  EXPECT_EQ(actions.count(ActionKind::kDrain, ActionOutcome::kExecuted), 2u);
  for (int i = 0; i < 200 && events_of(events_).back()["event"] != "drain_exit"; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    actions.reap(later + settings_.drain_timeout + seconds(1));
  }
}

// Review: the agent ignores SIGPIPE, and a spawned command keeps what its parent ignores: the drain ran with SIGPIPE
// ignored (bit 12 of SigIgn), unlike the same command run by hand. It starts with SIGPIPE at its default and
// nothing blocked, even when the agent's thread blocks signals.
TEST_F(ActionDispatcherTest, DrainRunsWithTheDefaultSignalsAShellWouldGiveIt) {
  settings_.checkpoint.enabled = false;
  settings_.drain.enabled = true;
  settings_.drain.rules = {Rule::kFragmentation};
  settings_.drain_on_rank_files = true;
  const auto status = dir_.path() / "status";
  settings_.drain_command = {"sh", "-c", "grep -E '^Sig(Ign|Blk)' /proc/self/status > " + status.string()};
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGPIPE, &ignore, &previous), 0);
  sigset_t blocked, before;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGUSR1);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &blocked, &before), 0);
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  ::sigaction(SIGPIPE, &previous, nullptr);
  wait_for_drain_exit(actions);
  std::istringstream lines(read_file(status));
  for (std::string line; std::getline(lines, line);) {
    const std::uint64_t mask = std::stoull(line.substr(line.find(':') + 1), nullptr, 16);
    if (line.starts_with("SigIgn")) {
      EXPECT_EQ(mask & (1ull << (SIGPIPE - 1)), 0u) << line;
    }
    if (line.starts_with("SigBlk")) {
      EXPECT_EQ(mask, 0u) << line;
    }
  }
  EXPECT_NE(read_file(status).find("SigBlk"), std::string::npos);
}

// The timeout is the drain policy's `timeout_seconds`: a real `sleep 30` is killed after 1 s.
TEST_F(ActionDispatcherTest, AHungDrainIsKilledAfterItsConfiguredTimeout) {
  settings_.checkpoint.enabled = false;
  settings_.drain.enabled = true;
  settings_.drain.rules = {Rule::kFragmentation};
  settings_.drain_on_rank_files = true;
  settings_.drain_timeout = seconds(1);
  settings_.drain_command = {"sleep", "30"};
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  const auto started = std::chrono::steady_clock::now();
  actions.dispatch({alert_}, view_, started);
  ASSERT_EQ(actions.count(ActionKind::kDrain, ActionOutcome::kExecuted), 1u) << events_.str();
  std::optional<std::chrono::steady_clock::duration> killed_after;
  for (int i = 0; i < 1000 && events_.str().find("drain_exit") == std::string::npos; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    const auto now = std::chrono::steady_clock::now();
    actions.reap(now);
    if (!killed_after && events_.str().find("drain_timeout") != std::string::npos) killed_after = now - started;
  }
  ASSERT_TRUE(killed_after.has_value()) << events_.str();
  EXPECT_GE(*killed_after, seconds(1));
  EXPECT_LT(*killed_after, seconds(5));
  const auto events = events_of(events_);
  ASSERT_EQ(events.size(), 4u) << events_.str();  // log, drain, drain_timeout, drain_exit
  EXPECT_EQ(events[2]["event"], "drain_timeout");
  EXPECT_EQ(events[2]["detail"], "still running after 1 s: its process group was killed");
  EXPECT_EQ(events[3]["event"], "drain_exit");
  EXPECT_EQ(events[3]["signal"], SIGKILL);
}

TEST(CommandValueTest, OnlyPlainNamesAndNumbersPass) {
  for (const char* value : {"", "node-a", "ip-10-0-0-1.ec2.internal", "llama_7b", "3", "0.95", "1e+10", "nan"}) {
    EXPECT_TRUE(is_safe_command_value(value)) << value;
  }
  for (const char* value : {"-1", "--force", "../x", "a/b", ".hidden", "a b", "a;b", "$(id)", "a\nb", "{job}"}) {
    EXPECT_FALSE(is_safe_command_value(value)) << value;
  }
  EXPECT_TRUE(is_safe_command_value(std::string(128, 'a')));
  EXPECT_FALSE(is_safe_command_value(std::string(129, 'a')));
}

// Issue 16: with NVML absent, a forged rank file claiming a full GPU drained the node.
TEST_F(ActionDispatcherTest, RankFilesAloneCannotDrainTheNode) {
  settings_.checkpoint.enabled = false;
  settings_.drain.enabled = true;
  settings_.drain.rules = {Rule::kHbmUsed};
  settings_.drain_command = {"touch", (dir_.path() / "drained").string()};
  alert_.rule = Rule::kHbmUsed;  // per rank, from its own reserved / total: what the rules do without NVML
  alert_.value = 0.97;
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  actions.dispatch({alert_}, view_, t0_ + seconds(1));  // refused again, logged once a minute
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "drained"));
  EXPECT_EQ(actions.count(ActionKind::kDrain, ActionOutcome::kFailed), 1u);
  EXPECT_EQ(events_of(events_).back()["detail"].get<std::string>().rfind("refused: only a rank file supports", 0), 0u);
  // NVML's own alert on the GPU drains: the refusals did not use up the node's rate limit.
  Alert from_nvml = alert_;
  from_nvml.rank.reset();
  from_nvml.target = "gpu1";
  actions.dispatch({from_nvml}, view_, t0_ + seconds(2));
  wait_for_drain_exit(actions);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "drained"));
  EXPECT_EQ(actions.count(ActionKind::kDrain, ActionOutcome::kExecuted), 1u);
}

TEST_F(ActionDispatcherTest, DrainThatCannotStartIsAFailure) {
  settings_.checkpoint.enabled = false;
  settings_.drain.enabled = true;
  settings_.drain.rules = {Rule::kFragmentation};
  settings_.drain_on_rank_files = true;
  settings_.drain_command = {"/nonexistent/drain-node"};
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  EXPECT_EQ(actions.count(ActionKind::kDrain, ActionOutcome::kFailed), 1u);
  const auto events = events_of(events_);
  EXPECT_EQ(events.back()["detail"], "cannot run /nonexistent/drain-node: No such file or directory");
}

}  // namespace
}  // namespace fragscope::agent

#include "agent/actions.h"

#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace fragscope::agent {
namespace {

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
    view_.ranks.push_back(rank);
    alert_.rule = Rule::kFragmentation;
    alert_.value = 0.31;
    alert_.threshold = 0.25;
    alert_.gpu = 1;
    alert_.rank = rank;
    alert_.target = rank.file_name;
    settings_.checkpoint.enabled = true;
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
  actions.remove_requests_of_gone_ranks({"rank3-pid77.fsr"});
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "rank3-pid77.fsr.checkpoint"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "rank5-pid90.fsr.checkpoint.tmp"));
  actions.remove_requests_of_gone_ranks({});  // rank 3 died (or went stale)
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "rank3-pid77.fsr.checkpoint"));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "notes.txt"));
  const auto events = events_of(events_);
  ASSERT_EQ(events.size(), 4u);  // log, checkpoint, two removals
  EXPECT_EQ(events[3]["event"], "checkpoint_request_removed");
  EXPECT_EQ(events[3]["path"], (dir_.path() / "rank3-pid77.fsr.checkpoint").string());
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
  settings_.drain_command = {"kubectl", "drain", "{node}", "--reason={rule} on rank {rank} of {job}"};
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  const auto events = events_of(events_);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1]["detail"], "would run: kubectl drain node-a --reason=fragmentation on rank 3 of llama");
}

TEST_F(ActionDispatcherTest, PerActionDryRunLeavesTheOtherActionLive) {
  settings_.drain.enabled = true;
  settings_.drain.dry_run = true;
  settings_.drain.rules = {Rule::kFragmentation};
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
  // A shell would run `touch x; touch y`; argv makes it one odd file name.
  settings_.drain_command = {"touch", (dir_.path() / "drained-{node}-{rule}-{rank}-{gpu}").string(),
                             (dir_.path() / "a; touch b").string()};
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  for (int i = 0; i < 200 && actions.count(ActionKind::kDrain, ActionOutcome::kExecuted) == 1 &&
                  events_.str().find("drain_exit") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    actions.reap();
  }
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "drained-node-a-fragmentation-3-1"));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "a; touch b"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "b"));
  const auto events = events_of(events_);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1]["action"], "drain");
  EXPECT_EQ(events[1]["outcome"], "executed");
  EXPECT_EQ(events[2]["event"], "drain_exit");
  EXPECT_EQ(events[2]["exit_status"], 0);
}

TEST_F(ActionDispatcherTest, DrainThatCannotStartIsAFailure) {
  settings_.checkpoint.enabled = false;
  settings_.drain.enabled = true;
  settings_.drain.rules = {Rule::kFragmentation};
  settings_.drain_command = {"/nonexistent/drain-node"};
  ActionDispatcher actions(settings_, dir_.path(), "node-a", events_);
  actions.dispatch({alert_}, view_, t0_);
  EXPECT_EQ(actions.count(ActionKind::kDrain, ActionOutcome::kFailed), 1u);
  const auto events = events_of(events_);
  EXPECT_EQ(events.back()["detail"], "cannot run /nonexistent/drain-node: No such file or directory");
}

}  // namespace
}  // namespace fragscope::agent

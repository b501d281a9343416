#include "agent/agent_config.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace fragscope::agent {
namespace {

std::string error_of(std::string_view text) {
  try {
    parse_agent_config(text, "agent.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(AgentConfigTest, ShippedConfigIsTheBuiltInDefault) {
  EXPECT_EQ(load_agent_config(FRAGSCOPE_SOURCE_DIR "/deploy/kubernetes/agent.toml"), AgentConfig{});
}

TEST(AgentConfigTest, DrainOverlayConfigTurnsOnOnlyTheDrainInDryRun) {
  const auto config = load_agent_config(FRAGSCOPE_SOURCE_DIR "/deploy/overlays/drain/agent.toml");
  AgentConfig expected;
  expected.actions.drain.enabled = true;
  expected.actions.drain.dry_run = true;
  expected.actions.drain_command = {"kubectl", "drain", "{node}", "--ignore-daemonsets", "--delete-emptydir-data",
                                    "--timeout=600s"};
  EXPECT_EQ(config, expected);
}

TEST(AgentConfigTest, EmptyConfigKeepsDefaults) { EXPECT_EQ(parse_agent_config("", "x"), AgentConfig{}); }

TEST(AgentConfigTest, ReadsThresholdsAndActions) {
  const auto config = parse_agent_config(R"(
[thresholds]
fragmentation_ratio = 0.1
hold_for_seconds = 0
[actions]
dry_run = true
[actions.checkpoint]
enabled = true
rules = ["alloc_retries"]
min_interval_seconds = 30
[actions.drain]
enabled = true
command = ["kubectl", "cordon", "{node}"]
)", "agent.toml");
  EXPECT_DOUBLE_EQ(config.thresholds.fragmentation_ratio, 0.1);
  EXPECT_EQ(config.thresholds.hold_for, std::chrono::seconds(0));
  EXPECT_DOUBLE_EQ(config.thresholds.hbm_used_ratio, 0.9);
  EXPECT_TRUE(config.actions.dry_run);
  EXPECT_TRUE(config.actions.checkpoint.enabled);
  EXPECT_EQ(config.actions.checkpoint.rules, std::set<Rule>{Rule::kAllocRetries});
  EXPECT_EQ(config.actions.checkpoint.min_interval, std::chrono::seconds(30));
  EXPECT_EQ(config.actions.drain_command, (std::vector<std::string>{"kubectl", "cordon", "{node}"}));
  EXPECT_FALSE(config.actions.drain_on_rank_files);
}

TEST(AgentConfigTest, DrainingOnRankFilesIsAnExplicitChoice) {
  const auto config = parse_agent_config(R"(
[actions.drain]
enabled = true
command = ["kubectl", "cordon", "{node}"]
rules = ["hbm_used", "alloc_retries"]
trust_rank_files = true
)", "agent.toml");
  EXPECT_TRUE(config.actions.drain_on_rank_files);
  EXPECT_EQ(config.actions.drain.rules, (std::set<Rule>{Rule::kHbmUsed, Rule::kAllocRetries}));
}

TEST(AgentConfigTest, TheDrainTimeoutIsAKeyOfTheDrain) {
  EXPECT_EQ(AgentConfig{}.actions.drain_timeout, std::chrono::seconds(600));
  EXPECT_EQ(parse_agent_config("[actions.drain]\ntimeout_seconds = 90\n", "agent.toml").actions.drain_timeout,
            std::chrono::seconds(90));
  EXPECT_EQ(parse_agent_config("[actions.drain]\ntimeout_seconds = 1\n", "agent.toml").actions.drain_timeout,
            std::chrono::seconds(1));
  EXPECT_EQ(parse_agent_config("[actions.drain]\ntimeout_seconds = 86400\n", "agent.toml").actions.drain_timeout,
            std::chrono::seconds(86400));
  for (const char* value : {"0", "0.5", "86401", "-5", "\"600\"", "true", "[600]"}) {
    EXPECT_EQ(error_of(std::string("[actions.drain]\ntimeout_seconds = ") + value + "\n"),
              "agent.toml: actions.drain.timeout_seconds: must be a number in [1, 86400]")
        << value;
  }
  // The drain's key, not the other actions'.
  EXPECT_EQ(error_of("[actions.checkpoint]\ntimeout_seconds = 60\n"),
            "agent.toml: actions.checkpoint.timeout_seconds: unknown key");
}

TEST(AgentConfigTest, MistakesAreOneLineErrorsNamingTheKey) {
  EXPECT_EQ(error_of("[thresholds]\nfragmentation = 0.3\n"), "agent.toml: thresholds.fragmentation: unknown key");
  EXPECT_EQ(error_of("[thresholds]\nhbm_used_ratio = 90\n"),
            "agent.toml: thresholds.hbm_used_ratio: must be a number in [0, 1]");
  EXPECT_EQ(
      error_of("[actions.log]\nrules = [\"oom\"]\n"),
      "agent.toml: actions.log.rules: unknown rule 'oom' (rules: fragmentation, alloc_retries, hbm_used, data_wait)");
  EXPECT_EQ(error_of("[actions.drain]\nenabled = true\n"),
            "agent.toml: actions.drain.command: is required when drain is enabled");
  EXPECT_EQ(error_of("[actions]\ndry_run = \"yes\"\n"), "agent.toml: actions.dry_run: must be true or false");
  EXPECT_EQ(error_of("[actions.drain]\nenabled = true\ncommand = [\"x\"]\nrules = [\"fragmentation\"]\n"),
            "agent.toml: actions.drain.rules: 'fragmentation' is measured by rank files only, which any user on the "
            "node can write; set trust_rank_files = true to drain on it");
  EXPECT_EQ(error_of("thresholds = 3\n"), "agent.toml: thresholds: must be a table");
  EXPECT_EQ(error_of("[thresholds\n").rfind("agent.toml:1:", 0), 0u);
}

// Review: the config was read with std::ifstream: /dev/zero grew without bound, and a directory started the agent
// on the defaults without a word. Deep dotted keys overflowed toml++'s recursion (SIGSEGV).
TEST(AgentConfigTest, SpecialFilesAndDeepKeysAreOneLineErrors) {
  const auto error_of = [](const std::string& path) {
    try {
      load_agent_config(path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("/dev/zero"), "/dev/zero: cannot read: is a character device, not a file");
  EXPECT_EQ(error_of(FRAGSCOPE_SOURCE_DIR "/deploy"), FRAGSCOPE_SOURCE_DIR "/deploy: cannot read: is a directory");
  std::string deep = "a";
  for (int i = 0; i < 100'000; ++i) deep += ".a";
  try {
    parse_agent_config(deep + " = 1\n", "deep.toml");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "deep.toml: line 1: a dotted key or table header of more than 32 parts");
  }
}

TEST(AgentConfigTest, MissingFileIsAnInputError) {
  EXPECT_THROW(load_agent_config("/nonexistent/agent.toml"), InputError);
}

}  // namespace
}  // namespace fragscope::agent

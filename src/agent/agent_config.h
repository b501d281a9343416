#pragma once
/// @file agent_config.h
/// @brief The agent's TOML config: thresholds and actions (deploy/kubernetes/agent.toml is the shipped one).

#include <filesystem>
#include <string_view>

#include "agent/actions.h"
#include "agent/rules.h"

namespace fragscope::agent {

/// @brief Everything the config file sets; a default-constructed one is the built-in default.
struct AgentConfig {
  Thresholds thresholds;
  ActionSettings actions;

  bool operator==(const AgentConfig&) const = default;
};

/// @brief Parses a config. Keys left out keep their defaults; unknown keys are errors (a typo
/// must not silently disable an action).
/// @param source names the text in error messages (usually the file path).
/// @throws InputError one line naming `source`, the key and the problem.
AgentConfig parse_agent_config(std::string_view text, std::string_view source);

/// @brief Reads and parses a config file. @throws InputError (unreadable file or bad content).
AgentConfig load_agent_config(const std::filesystem::path& path);

}  // namespace fragscope::agent

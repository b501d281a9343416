#pragma once
/// @file signals.h
/// @brief The agent's signals. SIGTERM and SIGINT stop it cleanly (the run loop logs "stop").
/// SIGHUP, SIGUSR1 and SIGUSR2, which would kill it without a word by default, are logged and
/// otherwise ignored: the config is read once, at start. SIGPIPE is ignored (a client that
/// hangs up is the server's business).

#include <atomic>
#include <string>
#include <vector>

namespace fragscope::agent {

/// @brief Installs the handlers with sigaction (SA_RESTART). `stop` is set on SIGTERM and
/// SIGINT; it must outlive every signal the process may receive.
void install_agent_signal_handlers(std::atomic<bool>& stop);

/// @brief The ignored signals received since the last call, by number, each once however often
/// it came (async-signal-safe bookkeeping: one bit per signal).
std::vector<int> take_ignored_signals();

/// @brief "SIGHUP", "SIGUSR1", "SIGUSR2", or "signal N".
std::string signal_name(int signal_number);

}  // namespace fragscope::agent

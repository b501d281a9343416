#pragma once
// Test support: runs a call in a child process with a memory cap and a time limit, so a test of
// hostile input (a FIFO, /dev/zero) reports a hang or an unbounded read as a failure instead of
// hanging the suite or exhausting the machine.

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <functional>
#include <string>

#include "util/error.h"

namespace fragscope::testing {

enum class CallOutcome { kReturned, kInputError, kOtherException, kKilled, kTimedOut };

struct IsolatedCall {
  CallOutcome outcome = CallOutcome::kKilled;
  std::string message;  ///< the InputError's (or other exception's) text
};

inline const char* to_string(CallOutcome o) {
  switch (o) {
    case CallOutcome::kReturned: return "returned";
    case CallOutcome::kInputError: return "threw InputError";
    case CallOutcome::kOtherException: return "threw another exception";
    case CallOutcome::kKilled: return "was killed";
    case CallOutcome::kTimedOut: return "timed out";
  }
  return "?";
}

/// Runs `call` in a forked child limited to `memory_bytes` of address space and `seconds` of
/// wall time (SIGALRM).
inline IsolatedCall run_isolated(const std::function<void()>& call, unsigned seconds = 5,
                                 rlim_t memory_bytes = rlim_t{1} << 30) {
  int fds[2];
  if (pipe(fds) != 0) return {CallOutcome::kKilled, "pipe failed"};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const rlimit limit{memory_bytes, memory_bytes};
    setrlimit(RLIMIT_AS, &limit);
    alarm(seconds);
    std::string report;
    try {
      call();
      report = "R";
    } catch (const InputError& e) {
      report = std::string("E") + e.what();
    } catch (const std::exception& e) {
      report = std::string("X") + e.what();
    }
    [[maybe_unused]] const auto written = write(fds[1], report.data(), report.size());
    _exit(0);
  }
  close(fds[1]);
  std::string report;
  char buffer[512];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) report.append(buffer, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return {WTERMSIG(status) == SIGALRM ? CallOutcome::kTimedOut : CallOutcome::kKilled, ""};
  if (report.empty()) return {CallOutcome::kKilled, ""};
  const char kind = report[0];
  report.erase(0, 1);
  if (kind == 'R') return {CallOutcome::kReturned, ""};
  return {kind == 'E' ? CallOutcome::kInputError : CallOutcome::kOtherException, report};
}

}  // namespace fragscope::testing

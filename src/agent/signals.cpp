#include "agent/signals.h"

#include <csignal>
#include <cstring>
#include <string>

namespace fragscope::agent {
namespace {

constexpr int kIgnored[] = {SIGHUP, SIGUSR1, SIGUSR2};

std::atomic<std::atomic<bool>*> stop_flag{nullptr};
std::atomic<unsigned long> ignored_received{0};  // bit n: signal n arrived
static_assert(decltype(ignored_received)::is_always_lock_free);
static_assert(decltype(stop_flag)::is_always_lock_free);

extern "C" void on_stop_signal(int) {
  if (auto* stop = stop_flag.load()) stop->store(true);
}

extern "C" void on_ignored_signal(int signal_number) { ignored_received.fetch_or(1ul << signal_number); }

void install(int signal_number, void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(signal_number, &action, nullptr);
}

}  // namespace

void install_agent_signal_handlers(std::atomic<bool>& stop) {
  stop_flag.store(&stop);
  install(SIGTERM, on_stop_signal);
  install(SIGINT, on_stop_signal);
  for (int signal_number : kIgnored) install(signal_number, on_ignored_signal);
  install(SIGPIPE, SIG_IGN);
}

std::vector<int> take_ignored_signals() {
  const unsigned long received = ignored_received.exchange(0);
  std::vector<int> out;
  for (int signal_number : kIgnored) {
    if ((received & (1ul << signal_number)) != 0) out.push_back(signal_number);
  }
  return out;
}

std::string signal_name(int signal_number) {
  switch (signal_number) {
    case SIGHUP: return "SIGHUP";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
  }
  return "signal " + std::to_string(signal_number);
}

}  // namespace fragscope::agent

#include "cli/progress_bar.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "util/bytes.h"
#include "util/shown_text.h"

namespace fragscope::cli {
namespace {

// A task shorter than this draws nothing. FRAGSCOPE_PROGRESS_AFTER_MS sets it (the pty test sets 0, so that a
// fast read on an idle machine still draws).
std::chrono::milliseconds show_after() {
  static const std::chrono::milliseconds value = [] {
    const char* text = std::getenv("FRAGSCOPE_PROGRESS_AFTER_MS");
    return std::chrono::milliseconds(text ? std::strtol(text, nullptr, 10) : 100);
  }();
  return value;
}
constexpr auto kRedrawEvery = std::chrono::milliseconds(100);
constexpr auto kEtaAfter = std::chrono::milliseconds(500);  // before, the rate is mostly start-up
constexpr int kBarWidth = 16;

std::string count_text(std::uint64_t n) {
  if (n < 10'000) return fmt::format("{}", n);
  if (n < 10'000'000) return fmt::format("{:.1f}k", static_cast<double>(n) / 1e3);
  if (n < 10'000'000'000) return fmt::format("{:.1f}M", static_cast<double>(n) / 1e6);
  return fmt::format("{:.1f}G", static_cast<double>(n) / 1e9);
}

std::string amount_text(const ProgressTick& tick) {
  if (tick.unit == "bytes") return "of " + format_bytes(tick.total);
  return fmt::format("of {} {}", count_text(tick.total), tick.unit);
}

std::string duration_text(std::chrono::seconds left) {
  const auto s = left.count();
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
}

std::size_t terminal_columns() {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

/// Characters on the screen, counting a UTF-8 sequence as one.
std::size_t screen_width(std::string_view text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

/// `task` cut from the left to `width` characters ("…hot.pickle.zst": the file's end says most).
std::string fit(std::string_view task, std::size_t width) {
  if (screen_width(task) <= width) return std::string(task);
  if (width == 0) return {};
  while (!task.empty() && screen_width(task) > width - 1) {
    task.remove_prefix(1);
    while (!task.empty() && (static_cast<unsigned char>(task.front()) & 0xC0) == 0x80) task.remove_prefix(1);
  }
  return "…" + std::string(task);
}

}  // namespace

ProgressBar::ProgressBar(bool wanted) {
  if (wanted && ::isatty(STDERR_FILENO)) progress_ = [this](const ProgressTick& tick) { report(tick); };
}

ProgressBar::~ProgressBar() { close(); }

void ProgressBar::close() {
  const std::lock_guard lock(mutex_);
  erase();
  closed_ = true;
}

void ProgressBar::report(const ProgressTick& tick) {
  const auto now = Clock::now();
  const std::lock_guard lock(mutex_);
  if (closed_) return;
  if (tick.task != task_) {
    task_ = tick.task;
    task_start_ = now;
    done_ = 0;
    task_ended_ = false;
  } else if (task_ended_ || tick.done < done_) {
    return;
  }
  done_ = tick.done;
  if (tick.total == 0) return;
  if (tick.done >= tick.total) {
    task_ended_ = true;
    erase();
    return;
  }
  if (now - task_start_ < show_after() || (drawn_ && now - last_draw_ < kRedrawEvery)) return;
  draw(tick, now);
}

void ProgressBar::draw(const ProgressTick& tick, Clock::time_point now) {
  const double fraction = static_cast<double>(tick.done) / static_cast<double>(tick.total);
  std::string bar(static_cast<std::size_t>(fraction * kBarWidth), '#');
  bar.resize(kBarWidth, ' ');
  std::string tail = fmt::format(" [{}] {:3.0f}% {}", bar, fraction * 100.0, amount_text(tick));
  const auto elapsed = now - task_start_;
  if (elapsed >= kEtaAfter && fraction >= 0.01) {
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(elapsed * ((1.0 - fraction) / fraction));
    tail += ", ETA " + duration_text(left);
  }
  const std::size_t columns = terminal_columns() - 1;  // the last column would wrap on some terminals
  const std::size_t room = columns > screen_width(tail) ? columns - screen_width(tail) : 0;
  fmt::print(stderr, "\r\033[K{}{}", fit(shown_name(tick.task, kShownPathBytes), room), tail);  // names a file
  std::fflush(stderr);
  drawn_ = true;
  last_draw_ = now;
}

void ProgressBar::erase() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace fragscope::cli

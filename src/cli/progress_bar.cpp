#include "cli/progress_bar.h"

#include <cstdio>
#include <unistd.h>

#include <fmt/format.h>

#include "util/bytes.h"

namespace fragscope::cli {

ProgressBar::ProgressBar(std::string label, std::uint64_t total_bytes, std::uint64_t min_bytes)
    : label_(std::move(label)), enabled_(total_bytes >= min_bytes && isatty(STDERR_FILENO)) {}

ProgressBar::~ProgressBar() {
  if (drawn_) std::fputs("\r\033[K", stderr);
}

void ProgressBar::update(std::uint64_t done, std::uint64_t total) {
  if (!enabled_ || total == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && done < total) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  const double fraction = std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, ' ');
  fmt::print(stderr, "\r\033[Kreading {} [{}] {:3.0f}% of {}", label_, bar, fraction * 100.0, format_bytes(total));
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace fragscope::cli

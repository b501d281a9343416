#pragma once
/// @file text_output.h
/// @brief How every text report reaches stdout.

#include <iostream>
#include <ostream>
#include <sstream>

#include "util/shown_text.h"

namespace fragscope::cli {

/// @brief Writes the text report `render` writes to stdout as a terminal may show it: the names it quotes come
/// from the inputs, and a control character or a bidirectional override in one is shown as `?` (util/shown_text.h).
template <typename Render>
void print_text(Render&& render) {
  std::ostringstream report;
  render(static_cast<std::ostream&>(report));
  std::cout << terminal_safe(report.view());
}

}  // namespace fragscope::cli

#pragma once
/// @file printable_text.h
/// @brief Text from a rank file made fit for a label value, an event and a command line.

#include <string>
#include <string_view>

namespace fragscope::agent {

/// @brief `raw` with every byte that is not part of valid UTF-8, and every control character
/// (C0, DEL, C1), replaced by U+FFFD. Prometheus drops a whole scrape over one label value that
/// is not valid UTF-8, and JSON events cannot hold it. Idempotent; ASCII text passes unchanged.
std::string printable_text(std::string_view raw);

}  // namespace fragscope::agent

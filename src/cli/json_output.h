#pragma once
/// @file json_output.h
/// @brief How every `--json` reaches stdout.

#include <iostream>

namespace fragscope::cli {

/// @brief Writes `document` to stdout, indented by `indent`, and a newline. A file or frame name is any bytes:
/// invalid UTF-8 is replaced (U+FFFD), not an exception that ends the command as an internal error.
template <typename Json>
void print_json(const Json& document, int indent) {
  std::cout << document.dump(indent, ' ', false, Json::error_handler_t::replace) << '\n';
}

}  // namespace fragscope::cli

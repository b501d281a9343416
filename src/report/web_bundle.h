#pragma once
/// @file web_bundle.h
/// @brief A page's front end as compiled into the binary: web/<page>/ bundled by esbuild at build
/// time (cmake/WebBundle.cmake), to be inlined into a self-contained HTML page.

#include <string_view>

namespace fragscope::web {

struct WebBundle {
  std::string_view script;  ///< one IIFE; contains no "</script"
  std::string_view style;   ///< contains no "</style"
};

}  // namespace fragscope::web

#pragma once
/// @file build_info.h
/// @brief Which fragscope this is: CMake's project version and the source revision it was built
/// from (`git rev-parse --short=12 HEAD` at build time, "-dirty" with uncommitted changes, or
/// -DFRAGSCOPE_REVISION=... for a build outside git; "unknown" when neither says).
///
/// `fragscope --version`, the "build_info" object of every `--json` document and the agent's
/// fragscope_build_info metric all read it here.

#include <string_view>

namespace fragscope {

struct BuildInfo {
  std::string_view version;   ///< "0.1.0"
  std::string_view revision;  ///< "5ca0a7d1e2f3", "5ca0a7d1e2f3-dirty" or "unknown"
};

BuildInfo build_info();

}  // namespace fragscope

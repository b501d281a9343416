#pragma once
/// @file file_name.h
/// @brief The last component of a path as a trace records it ("/opt/venv/.../trainer.py" -> "trainer.py"): what
/// the doctor's words name a frame's file by.

#include <string_view>

namespace fragscope {

/// @brief `path` after its last '/', or all of it when it has none. A view into `path`.
inline std::string_view file_name_of(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace fragscope

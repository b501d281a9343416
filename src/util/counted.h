#pragma once
/// @file counted.h
/// @brief A count with its noun in the number it takes ("1 time", "7 times"): the doctor's sentences
/// say what they count without "(s)".

#include <cstddef>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace fragscope {

/// @brief "`n` `one`" when n is 1, else "`n` `many`".
inline std::string counted(std::size_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

}  // namespace fragscope

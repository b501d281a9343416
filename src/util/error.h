#pragma once
/// @file error.h
/// @brief The one exception type for bad input (files, flags, configs).
///
/// Every reader throws InputError with a message that names the source and the problem
/// ("snapshot.pickle: truncated at byte 1024 while reading LONG1"). The CLI prints it on one
/// line and exits with status 2. Programming errors use the standard exceptions instead.

#include <stdexcept>
#include <string>

namespace fragscope {

/// @brief Bad or unusable input. what() is one line, starting with the file name when there is one.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace fragscope

#include "util/blocking_io.h"

#include <fcntl.h>

namespace fragscope {

bool make_blocking(int fd) noexcept {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0;
}

}  // namespace fragscope

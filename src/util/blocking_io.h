#pragma once

namespace fragscope {

// Files that may be FIFOs are opened with O_NONBLOCK, so that the open itself never waits for the
// other end (a reader for a write, a writer for a read). Once open, reads and writes should block
// as usual: a pipe's other end may be slower than this process.
// REQUIRES: fd is open. Returns false (errno set) when the flags cannot be read or changed.
bool make_blocking(int fd) noexcept;

}  // namespace fragscope

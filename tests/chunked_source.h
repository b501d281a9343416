#pragma once
// Test support (tests and fuzz targets): a ByteSource that hands out bytes in small borrowed
// chunks, to exercise readers across chunk boundaries.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "snapshot/byte_source.h"

namespace fragscope::snapshot {

/// Hands out `bytes` in borrowed chunks whose sizes cycle through `sizes`, so that opcodes,
/// lengths and strings straddle chunk boundaries everywhere.
class ChunkedSource final : public ByteSource {
 public:
  ChunkedSource(std::span<const std::uint8_t> bytes, std::vector<std::size_t> sizes)
      : bytes_(bytes), sizes_(std::move(sizes)) {}
  std::size_t read(std::span<std::uint8_t> out) override {
    const auto chunk = next_chunk();
    const std::size_t n = std::min(out.size(), chunk.size());
    std::copy_n(chunk.begin(), n, out.begin());
    pos_ -= chunk.size() - n;
    return n;
  }
  std::span<const std::uint8_t> next_chunk() override {
    const std::size_t n = std::min(sizes_[turn_++ % sizes_.size()], bytes_.size() - pos_);
    // Scribble over the previous chunk: a reader that kept it past this call reads garbage.
    std::fill(held_.begin(), held_.end(), std::uint8_t{0xee});
    held_.assign(bytes_.begin() + static_cast<std::ptrdiff_t>(pos_),
                 bytes_.begin() + static_cast<std::ptrdiff_t>(pos_ + n));
    pos_ += n;
    return held_;
  }
  std::uint64_t input_consumed() const override { return pos_; }

 private:
  std::span<const std::uint8_t> bytes_;
  std::vector<std::size_t> sizes_;
  std::size_t turn_ = 0;
  std::size_t pos_ = 0;
  std::vector<std::uint8_t> held_;
};

}  // namespace fragscope::snapshot

// libFuzzer target: any bytes given to the snapshot reader (plain, gzip or zstd) end in a model
// or an InputError; anything else (a crash, a sanitizer report, another exception, a hang) is a bug.
// Plain inputs are also read in small chunks (sizes derived from the input's length), so that
// opcodes and strings straddle chunk boundaries as they do in large files.
#include <cstddef>
#include <cstdint>
#include <span>

#include "../tests/chunked_source.h"
#include "metrics/snapshot_analysis.h"
#include "snapshot/snapshot_reader.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  try {
    const auto snapshot = fragscope::snapshot::parse_snapshot(bytes, "fuzz-input");
    // What analyze does next must hold on any model the reader accepts.
    (void)fragscope::metrics::analyze_snapshot(snapshot, 0);
  } catch (const fragscope::InputError&) {
  }
  if (fragscope::snapshot::detect_compression(bytes) == fragscope::snapshot::Compression::kNone) {
    fragscope::snapshot::ChunkedSource chunked(bytes, {size % 61 + 1, size % 7 + 1, 4096});
    try {
      (void)fragscope::snapshot::read_snapshot(chunked, "fuzz-input");
    } catch (const fragscope::InputError&) {
    }
  }
  return 0;
}

// libFuzzer target: any bytes given to the snapshot reader (plain, gzip or zstd) end in a model
// or an InputError; anything else (a crash, a sanitizer report, another exception, a hang) is a bug.
#include <cstddef>
#include <cstdint>
#include <span>

#include "metrics/snapshot_analysis.h"
#include "snapshot/snapshot_reader.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto snapshot = fragscope::snapshot::parse_snapshot(std::span(data, size), "fuzz-input");
    // What analyze does next must hold on any model the reader accepts.
    (void)fragscope::metrics::analyze_snapshot(snapshot, 0);
  } catch (const fragscope::InputError&) {
  }
  return 0;
}

// libFuzzer target: any bytes given to the snapshot reader (plain, gzip or zstd) end in a model
// or an InputError; anything else (a crash, a sanitizer report, another exception, a hang) is a bug.
// Plain inputs are also read in small chunks (sizes derived from the input's length), so that
// opcodes and strings straddle chunk boundaries as they do in large files, and the outcome must
// be the same as reading them whole: the same model or the same error (a refusal for memory at the
// same byte, whatever the memory it held then: tests/read_outcome.h). (Whole, the reader takes
// its fast paths for dict bodies; in small chunks it hands over to the generic loop anywhere.)
// Framed plain inputs are also read in parts on threads (parallel_reader.h), with the same oracle.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include <fmt/format.h>

#include "../tests/chunked_source.h"
#include "../tests/read_outcome.h"
#include "metrics/snapshot_analysis.h"
#include "snapshot/parallel_reader.h"
#include "snapshot/snapshot_reader.h"
#include "snapshot/stream_reader.h"
#include "util/error.h"

namespace {

/// What reading gave: the error message, or a digest of every field of the model.
std::string outcome_of(const fragscope::snapshot::Snapshot& s) {
  std::uint64_t digest = 0;
  auto mix = [&digest](std::uint64_t v) { digest = (digest ^ v) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull; };
  for (const auto& seg : s.segments) {
    mix(seg.address); mix(seg.total_size); mix(seg.stream); mix(seg.block_count); mix(seg.stack);
    mix(static_cast<std::uint64_t>(seg.device)); mix(static_cast<std::uint64_t>(seg.pool)); mix(seg.is_expandable);
  }
  for (const auto& b : s.blocks) {
    mix(b.address); mix(b.size); mix(b.requested_size); mix(static_cast<std::uint64_t>(b.state)); mix(b.stack);
  }
  for (const auto& trace : s.device_traces) {
    mix(trace.size());
    for (const auto& e : trace) {
      mix(e.addr); mix(e.size); mix(e.stream); mix(static_cast<std::uint64_t>(e.time_us));
      mix(static_cast<std::uint64_t>(e.action)); mix(e.stack); mix(e.user_metadata); mix(e.action_name);
    }
  }
  for (std::size_t id = 0; id < s.stacks.stack_count(); ++id)
    mix(s.stacks.stack(static_cast<fragscope::snapshot::StackId>(id)).size());
  return fmt::format("model: {} segments, {} blocks, {} strings, digest {:x}", s.segments.size(),
                     s.blocks.size(), s.strings.size(), digest);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  std::string whole;
  try {
    const auto snapshot = fragscope::snapshot::parse_snapshot(bytes, "fuzz-input");
    whole = outcome_of(snapshot);
    // What analyze does next must hold on any model the reader accepts.
    (void)fragscope::metrics::analyze_snapshot(snapshot, 0);
  } catch (const fragscope::InputError& e) {
    whole = e.what();
  }
  if (fragscope::snapshot::detect_compression(bytes) == fragscope::snapshot::Compression::kNone) {
    fragscope::snapshot::ChunkedSource chunked(bytes, {size % 61 + 1, size % 7 + 1, 4096});
    std::string in_chunks;
    try {
      in_chunks = outcome_of(fragscope::snapshot::read_snapshot(chunked, "fuzz-input"));
    } catch (const fragscope::InputError& e) {
      in_chunks = e.what();
    }
    if (fragscope::snapshot::without_memory_held(in_chunks) != fragscope::snapshot::without_memory_held(whole)) {
      std::fprintf(stderr, "whole:     %s\nin chunks: %s\n", whole.c_str(), in_chunks.c_str());
      std::abort();
    }
    // Read in parts on threads (where the input is framed): the same model or error again.
    const fragscope::snapshot::OpenSourceAt open_at = [&](std::uint64_t offset) {
      return fragscope::snapshot::open_plain_memory_at(bytes, offset);
    };
    const fragscope::snapshot::ReadAt read_at = [&](std::uint64_t offset, std::span<std::uint8_t> out) -> std::size_t {
      if (offset >= size) return 0;
      const std::size_t n = std::min<std::uint64_t>(out.size(), size - offset);
      std::memcpy(out.data(), data + offset, n);
      return n;
    };
    std::string in_parts;
    try {
      in_parts = outcome_of(
          fragscope::snapshot::read_snapshot_in_parts(open_at, read_at, "fuzz-input", size, {}, size % 5 + 2));
    } catch (const fragscope::InputError& e) {
      in_parts = e.what();
    }
    if (fragscope::snapshot::without_memory_held(in_parts) != fragscope::snapshot::without_memory_held(whole)) {
      std::fprintf(stderr, "whole:    %s\nin parts: %s\n", whole.c_str(), in_parts.c_str());
      std::abort();
    }
  }
  return 0;
}

#pragma once
// Test support (tests and fuzz targets): comparing what two ways of reading one input gave.

#include <regex>
#include <string>

namespace fragscope::snapshot {

/// `outcome` with the memory a read refused for memory held left out. Read in small chunks the reader also
/// holds the buffer it stitches values across chunks in, and in parts on threads the parts' own tables, so
/// it refuses at the same byte for the same reason holding a little more (fuzz/seeds/snapshot_reader/
/// memory_refused_at_the_same_byte_*: 72.55 MiB whole, 73.05 MiB in parts).
inline std::string without_memory_held(const std::string& outcome) {
  static const std::regex held("needs more than [0-9.]+ [KMGT]?i?B of memory for");
  return std::regex_replace(outcome, held, "needs more than (held) of memory for");
}

}  // namespace fragscope::snapshot

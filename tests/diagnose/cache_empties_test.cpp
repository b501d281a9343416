// The job's own torch.cuda.empty_cache() calls (cache_empties.h), on field recordings: a loop that empties the cache
// every 3 steps is counted call by call, at its line; the allocator's own release of cached segments when a
// cudaMalloc fails is no call.
#include "diagnose/cache_empties.h"

#include <gtest/gtest.h>

#include "field_recordings.h"

namespace fragscope::diagnose {
namespace {

using fragscope::testing::last_oom;
using fragscope::testing::read_field_snapshot;

CacheEmpties empties_of(const std::string& name) {
  const snapshot::Snapshot snap = read_field_snapshot(name);
  return find_cache_empties(snap, 0, last_oom(snap));
}

// llama_loop.py --empty-cache-every 3 (field ec_edge): three calls before the OOM, each releasing several segments.
TEST(CacheEmpties, EachCallOfTheJobIsCountedAtItsLine) {
  const CacheEmpties e = empties_of("ec_edge");
  EXPECT_EQ(e.calls, 3u);
  EXPECT_GT(e.released_bytes, 0u);
  EXPECT_EQ(e.frame, "llama_loop.py:49 in <module>");
}

// Multi-scale training (msd_edge, 183 segment frees) and a sampling loop (gsl_edge, 154) never call it: their frees
// are the allocator's, freeing cached segments to retry a failed cudaMalloc.
TEST(CacheEmpties, TheAllocatorsOwnReleaseIsNoCall) {
  for (const char* name : {"msd_edge", "gsl_edge"}) {
    SCOPED_TRACE(name);
    const CacheEmpties e = empties_of(name);
    EXPECT_EQ(e.calls, 0u);
    EXPECT_EQ(e.released_bytes, 0u);
    EXPECT_TRUE(e.frame.empty()) << e.frame;
  }
}

}  // namespace
}  // namespace fragscope::diagnose

// Telemetry steps placed on the trace of the same run: every record of a recorded run lands on
// the event where the allocator held its figures, in order; another run's records do not align.
#include <gtest/gtest.h>

#include "../fixture_support.h"
#include "diagnose/recorded_curve.h"
#include "diagnose/step_alignment.h"
#include "inputs/telemetry_reader.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::diagnose {
namespace {

using fragscope::testing::fixtures_dir;

struct Recording {
  snapshot::Snapshot snapshot;
  RecordedCurve curve;
  std::vector<inputs::StepRecord> records;
};

Recording load(const std::string& scenario, const std::string& steps_of = "") {
  const auto dir = fixtures_dir() / scenario;
  Recording r{snapshot::read_snapshot_file((dir / "snapshot.pickle.zst").string()), {}, {}};
  r.curve = walk_recorded_curve(r.snapshot, 0);
  r.records = inputs::read_telemetry_file(fixtures_dir() / (steps_of.empty() ? scenario : steps_of) / "steps.jsonl");
  return r;
}

TEST(StepAlignment, EveryRecordLandsWhereTheAllocatorHeldItsFigures) {
  for (const char* scenario : {"eval_spike", "big"}) {
    const Recording r = load(scenario);
    const auto steps = align_steps_to_trace(r.records, r.snapshot.trace(0), r.curve);
    ASSERT_EQ(steps.size(), r.records.size()) << scenario;
    std::size_t previous = 0;
    for (const AlignedStep& s : steps) {
      const inputs::StepRecord& record = r.records[s.record];
      EXPECT_TRUE(s.by_figures) << scenario << " step " << record.step;
      EXPECT_EQ(r.curve.reserved[s.trace_index], *record.memory_stat("reserved_bytes.all.current"));
      EXPECT_EQ(r.curve.allocated[s.trace_index], *record.memory_stat("requested_bytes.all.current"));
      EXPECT_GT(s.trace_index, previous) << scenario << ": steps end in order";
      previous = s.trace_index;
    }
  }
}

TEST(StepAlignment, AnotherRunsStepsDoNotAlign) {
  // The same model and seed, but an input-bound run's figures never occur in this trace.
  const Recording r = load("eval_spike", "input_bound");
  EXPECT_TRUE(align_steps_to_trace(r.records, r.snapshot.trace(0), r.curve).empty());
}

TEST(StepAlignment, RecordsWithoutTimeOrTraceWithoutTimeDoNotAlign) {
  Recording r = load("eval_spike");
  std::vector<inputs::StepRecord> untimed = r.records;
  for (auto& record : untimed) record.t.reset();
  EXPECT_TRUE(align_steps_to_trace(untimed, r.snapshot.trace(0), r.curve).empty());
  std::vector<snapshot::TraceEvent> events(r.snapshot.trace(0).begin(), r.snapshot.trace(0).end());
  for (auto& e : events) e.time_us = 0;
  EXPECT_TRUE(align_steps_to_trace(r.records, events, r.curve).empty());
}

}  // namespace
}  // namespace fragscope::diagnose

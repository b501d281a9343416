// The OOM as the doctor's inputs state it (diagnose/oom_context.h), on the recorded frag_oom_104
// fixture: which inputs say it happened, the moment in numbers from the trace's `oom` entry (or
// from the OOM message alone), and the blind-spot line stating them.
#include "diagnose/oom_context.h"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "doctor_fixture_files.h"
#include "util/bytes.h"

namespace fragscope::diagnose {
namespace {

using fragscope::testing::doctor_user_files;

bool names(const OomSignals& s, const std::string& text) {
  return std::any_of(s.sources.begin(), s.sources.end(),
                     [&](const std::string& source) { return source.find(text) != std::string::npos; });
}

TEST(OomContext, EveryInputThatStatesTheOomIsASource) {
  const DoctorInputs in = collect_doctor_inputs(doctor_user_files("frag_oom_104"));
  const OomSignals s = gather_oom_signals(in);
  ASSERT_TRUE(s.any());
  ASSERT_EQ(in.snapshots.size(), 1u);
  ASSERT_TRUE(in.snapshots[0].oom_index.has_value());
  EXPECT_TRUE(names(s, "the `oom` entry at trace event " + std::to_string(*in.snapshots[0].oom_index)));
  EXPECT_TRUE(names(s, "num_ooms = 1 in "));  // stats.json: truth.json's num_ooms
  EXPECT_TRUE(names(s, "the OOM message in "));
  EXPECT_FALSE(s.messages.empty());
}

TEST(OomContext, TheTracesOomEntryGivesTheMomentInExactBytes) {
  const DoctorInputs in = collect_doctor_inputs(doctor_user_files("frag_oom_104"));
  const SnapshotInput& snap = in.snapshots[0];
  const std::size_t oom = *snap.oom_index;
  const RecordedCurve curve = walk_recorded_curve(snap.snapshot, snap.device);
  const OomContext c = build_oom_context(in, gather_oom_signals(in), &snap, snap.device, oom, curve, Diagnosis{});
  const auto& entry = snap.snapshot.trace(snap.device)[oom];
  EXPECT_EQ(c.trace_index, oom);
  EXPECT_EQ(c.request_bytes, entry.size);
  EXPECT_EQ(c.driver_free_bytes, entry.addr);  // the `oom` entry's addr is the driver's free memory
  ASSERT_TRUE(c.reserved_bytes && c.allocated_bytes && c.reserved_unallocated);
  // The log prints the moment in two decimals: the reserved bytes of the trace print as the log's
  // figure and are kept exact; its allocated bytes (35.20 GiB) do not print as the log's 35.25 GiB
  // (the allocator's own count differs from the trace's), so the log's figures are taken.
  const inputs::OomMessage& m = gather_oom_signals(in).messages.front();
  ASSERT_TRUE(m.allocated_by_pytorch && m.reserved_unallocated);
  EXPECT_EQ(*c.reserved_bytes, curve.reserved[oom]);
  EXPECT_NE(*m.allocated_by_pytorch, curve.allocated[oom]);
  EXPECT_EQ(*c.allocated_bytes, *m.allocated_by_pytorch);
  // Reserved less allocated prints as the log's 3.39 GiB: the difference is kept, not the rounded figure.
  EXPECT_EQ(*c.reserved_unallocated, *c.reserved_bytes - *c.allocated_bytes);
  EXPECT_NE(*c.reserved_unallocated, *m.reserved_unallocated);
  const std::string line = blind_spot_line(c);
  EXPECT_NE(line.find("the driver reports " + format_bytes(entry.addr) + " free"), std::string::npos) << line;
  EXPECT_NE(line.find("PyTorch holds " + format_bytes(*c.reserved_unallocated) + " reserved but unallocated"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("the request was " + format_bytes(entry.size)), std::string::npos) << line;
}

TEST(OomContext, WithoutATraceTheMessageGivesTheMoment) {
  std::vector<std::string> files = doctor_user_files("frag_oom_104");
  std::erase_if(files, [](const std::string& f) { return f.find("snapshot") != std::string::npos; });
  const DoctorInputs in = collect_doctor_inputs(files);
  const OomSignals s = gather_oom_signals(in);
  ASSERT_FALSE(s.messages.empty());
  const inputs::OomMessage& m = s.messages.front();
  const OomContext c = build_oom_context(in, s, nullptr, 0, std::nullopt, RecordedCurve{}, Diagnosis{});
  EXPECT_FALSE(c.trace_index.has_value());
  ASSERT_TRUE(m.tried_to_allocate.has_value());
  EXPECT_EQ(c.request_bytes, *m.tried_to_allocate);
  EXPECT_EQ(c.driver_free_bytes, m.free);
  EXPECT_EQ(c.reserved_bytes, m.reserved_by_pytorch);
  EXPECT_EQ(c.allocated_bytes, m.allocated_by_pytorch);
}

}  // namespace
}  // namespace fragscope::diagnose

#include "snapshot/stream_reader.h"

#include "snapshot/pickle_machine.h"
#include "snapshot/read_progress.h"
#include "snapshot/snapshot_builder.h"

namespace fragscope::snapshot {

Snapshot read_snapshot(ByteSource& source, const std::string& name, std::uint64_t input_size,
                       const ProgressCallback& progress, const ReadLimits& limits) {
  Snapshot snapshot;
  SnapshotBuilder builder(snapshot, source.expected_size());
  const pickle::Machine* running = nullptr;
  pickle::Machine machine(source, name, snapshot.strings, &builder,
                          machine_progress(progress, source, running, input_size), limits);
  running = &machine;
  const pickle::Value top = machine.run();
  builder.finish(machine, top);
  report_read(progress, source.expected_size(), input_size);
  return snapshot;
}

}  // namespace fragscope::snapshot

#include "snapshot/snapshot_reader.h"

#include <algorithm>

#include "snapshot/byte_source.h"
#include "snapshot/pickle_machine.h"
#include "snapshot/snapshot_builder.h"

namespace fragscope::snapshot {

Snapshot read_snapshot(ByteSource& source, const std::string& name, std::uint64_t input_size,
                       const ProgressCallback& progress) {
  Snapshot snapshot;
  SnapshotBuilder builder(snapshot, source.expected_size());
  // Progress counts pickle bytes when their total is known (plain files, zstd frames that
  // record their size): that is the work. Else it counts bytes of the file.
  const std::uint64_t expected = source.expected_size();
  std::function<void()> tick;
  pickle::Machine* running = nullptr;
  if (progress) {
    tick = [&] {
      if (expected) progress(std::min(running->offset(), expected), expected);
      else progress(source.input_consumed(), input_size);
    };
  }
  pickle::Machine machine(source, name, snapshot.strings, &builder, std::move(tick));
  running = &machine;
  const pickle::Value top = machine.run();
  builder.finish(machine, top);
  if (progress) progress(expected ? expected : input_size, expected ? expected : input_size);
  return snapshot;
}

Snapshot read_snapshot_file(const std::string& path, const ProgressCallback& progress) {
  std::uint64_t size = 0;
  auto source = open_file_source(path, &size);
  return read_snapshot(*source, path, size, progress);
}

Snapshot parse_snapshot(std::span<const std::uint8_t> bytes, const std::string& source,
                        const ProgressCallback& progress) {
  auto stream = open_memory_source(bytes, source);
  return read_snapshot(*stream, source, bytes.size(), progress);
}

}  // namespace fragscope::snapshot

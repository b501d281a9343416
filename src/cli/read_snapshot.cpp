#include "cli/read_snapshot.h"

#include <optional>

#include "cli/progress_bar.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::cli {

snapshot::Snapshot read_snapshot_with_progress(const std::string& path) {
  std::optional<ProgressBar> progress;
  return snapshot::read_snapshot_file(path, [&](std::uint64_t done, std::uint64_t size) {
    if (!progress) progress.emplace(path, size);
    progress->update(done, size);
  });
}

}  // namespace fragscope::cli

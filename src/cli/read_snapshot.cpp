#include "cli/read_snapshot.h"

#include <optional>

#include <fmt/format.h>

#include "cli/progress_bar.h"
#include "snapshot/snapshot_reader.h"
#include "util/bytes.h"

namespace fragscope::cli {

void add_max_memory_option(CLI::App* cmd, snapshot::ReadLimits& limits) {
  cmd->add_option_function<std::string>(
         "--max-memory",
         [&limits](const std::string& text) {
           const auto bytes = parse_bytes(text);
           if (!bytes || *bytes == 0)
             throw CLI::ValidationError("--max-memory", "\"" + text + "\" is not a size (e.g. 16G)");
           limits.max_memory = *bytes;
           limits.relative = false;  // the user vouches for the file: SIZE alone holds
         },
         fmt::format("read a snapshot you trust with up to SIZE of memory; without it a read may use {} at most "
                     "and a file far less (limits relative to its size, against decompression and reference bombs)",
                     format_bytes(snapshot::kDefaultMaxMemory)))
      ->type_name("SIZE");
}

snapshot::Snapshot read_snapshot_with_progress(const std::string& path, const snapshot::ReadLimits& limits) {
  std::optional<ProgressBar> progress;
  return snapshot::read_snapshot_file(
      path,
      [&](std::uint64_t done, std::uint64_t size) {
        if (!progress) progress.emplace(path, size);
        progress->update(done, size);
      },
      limits);
}

}  // namespace fragscope::cli

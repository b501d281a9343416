#include "cli/max_memory_option.h"

#include <string>

#include <fmt/format.h>

#include "cli/flag_checks.h"
#include "util/bytes.h"

namespace fragscope::cli {

void add_max_memory_option(CLI::App* cmd, snapshot::ReadLimits& limits) {
  cmd->add_option_function<std::string>(
         "--max-memory",
         [&limits](const std::string& text) {
           limits.max_memory = *parse_bytes(text);  // size_value() checked it
           limits.relative = false;                 // the user vouches for the file: SIZE alone holds
         },
         fmt::format("read a snapshot you trust with up to SIZE of memory; without it a read may use {} at most "
                     "and a file far less (limits relative to its size, against decompression and reference bombs)",
                     format_bytes(snapshot::kDefaultMaxMemory)))
      ->type_name("SIZE")
      ->check(size_value());
}

}  // namespace fragscope::cli

#include "inputs/training_log.h"

#include <algorithm>
#include <array>
#include <string>

#include "inputs/oom_message_parser.h"
#include "inputs/text_file.h"
#include "util/input_file.h"

namespace fragscope::inputs {
namespace {

// As ATen spells them, from the second letter on: "FIND was unable…", "GET was unable…", older releases'
// "Unable…".
constexpr std::array<std::string_view, 2> kNoPlanErrors = {"nable to find an engine to execute this computation",
                                                           "nable to find a valid cuDNN algorithm to run convolution"};

}  // namespace

bool is_cudnn_no_plan_error(std::string_view line) {
  return std::any_of(kNoPlanErrors.begin(), kNoPlanErrors.end(),
                     [&](std::string_view error) { return line.find(error) != std::string_view::npos; });
}

TrainingLog read_training_log_file(const std::filesystem::path& path) {
  LineReader lines(open_input(path.string()), kMaxLogLineBytes, LineReader::LongLines::kCut, 0, "a log");
  TrainingLog log;
  OomMessageScanner ooms;
  std::string_view line;
  while (lines.next(line)) {
    ooms.add(line);
    if (log.library_failures.size() < kMaxLibraryAllocFailures)
      if (auto failure = parse_library_alloc_failure(line)) {
        failure->line = lines.line_number();
        log.library_failures.push_back(std::move(*failure));
      }
    if (is_cudnn_no_plan_error(line)) {
      log.cudnn_no_plan_line = lines.line_number();
      log.cudnn_no_plan_rank = rank_prefix_of(line);
    }
  }
  log.oom_messages = ooms.finish();
  return log;
}

}  // namespace fragscope::inputs

#include "diagnose/compiled_graph.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <vector>

#include "util/file_name.h"

namespace fragscope::diagnose {

namespace {

/// Inductor's code hash: "c" and the first 51 characters of a base-32 SHA-256 (lower case).
constexpr std::size_t kHashChars = 51;

/// Whether a stack has a frame in one file, each stack looked at once.
class FramesInFile {
 public:
  FramesInFile(const snapshot::Snapshot& snapshot, snapshot::StringId file)
      : snapshot_(snapshot), file_(file), known_(snapshot.stacks.stack_count(), kUnknown) {}
  bool operator()(snapshot::StackId stack) {
    if (stack == 0 || stack >= known_.size()) return false;
    if (known_[stack] == kUnknown) {
      const auto frames = snapshot_.stacks.stack(stack);
      known_[stack] = std::any_of(frames.begin(), frames.end(), [&](snapshot::FrameId f) {
        return snapshot_.stacks.frame(f).filename == file_;
      }) ? kYes : kNo;
    }
    return known_[stack] == kYes;
  }

 private:
  static constexpr std::int8_t kUnknown = -1, kNo = 0, kYes = 1;
  const snapshot::Snapshot& snapshot_;
  snapshot::StringId file_;
  std::vector<std::int8_t> known_;
};

}  // namespace

bool is_inductor_module(std::string_view file) {
  file = file_name_of(file);
  if (file.size() != 1 + kHashChars + 3 || file.front() != 'c' || !file.ends_with(".py")) return false;
  const std::string_view hash = file.substr(1, kHashChars);
  return std::all_of(hash.begin(), hash.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || (c >= '2' && c <= '7');  // RFC 4648 base 32
  });
}

std::optional<CompiledAnew> compiled_anew(const snapshot::Snapshot& snapshot, int device, std::size_t oom_index,
                                          std::size_t unit_start) {
  const auto trace = snapshot.trace(device);
  const snapshot::StackId oom_stack = trace[oom_index].stack;
  if (oom_stack == 0) return std::nullopt;
  std::optional<snapshot::StringId> module;
  for (const snapshot::FrameId f : snapshot.stacks.stack(oom_stack))  // innermost first
    if (const snapshot::StringId file = snapshot.stacks.frame(f).filename;
        is_inductor_module(snapshot.strings.view(file))) {
      module = file;
      break;
    }
  if (!module) return std::nullopt;
  FramesInFile in_module(snapshot, *module);
  for (std::size_t i = 0; i < unit_start; ++i)
    if (in_module(trace[i].stack)) return std::nullopt;
  std::size_t first = unit_start;
  while (first < oom_index && !in_module(trace[first].stack)) ++first;
  return CompiledAnew{std::string(file_name_of(snapshot.strings.view(*module))), first};
}

}  // namespace fragscope::diagnose

#include "diagnose/python_frames.h"

#include "diagnose/name_words.h"

namespace fragscope::diagnose {

bool is_python_frame(const snapshot::Snapshot& snapshot, snapshot::FrameId frame) {
  const std::string_view file = snapshot.strings.view(snapshot.stacks.frame(frame).filename);
  return file.ends_with(".py") || file.starts_with("<frozen");
}

std::vector<snapshot::FrameId> python_frames(const snapshot::Snapshot& snapshot, snapshot::StackId stack) {
  std::vector<snapshot::FrameId> out;
  const auto frames = snapshot.stacks.stack(stack);  // innermost first
  for (auto it = frames.rbegin(); it != frames.rend(); ++it)
    if (is_python_frame(snapshot, *it)) out.push_back(*it);
  return out;
}

std::string_view torch_path(std::string_view file) {
  for (const std::string_view packages : {"site-packages/", "dist-packages/"}) {
    if (const auto at = file.rfind(packages); at != std::string_view::npos) {
      const std::string_view inside = file.substr(at + packages.size());
      return inside.starts_with("torch/") ? inside.substr(6) : std::string_view();
    }
  }
  const auto at = file.rfind("/torch/");
  return at == std::string_view::npos ? std::string_view() : file.substr(at + 7);
}

bool names_evaluation(std::string_view text) { return has_word_beginning_with(text, {"eval", "valid", "predict"}); }

}  // namespace fragscope::diagnose

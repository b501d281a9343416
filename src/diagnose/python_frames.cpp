#include "diagnose/python_frames.h"

#include <algorithm>
#include <cctype>
#include <string>

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

bool names_evaluation(std::string_view text) {
  // Words begin after a non-letter or at a lower-to-upper change ("_EvaluationLoop", "run_eval",
  // "isValid"); a word must begin with the stem: "invalid" and "retrieval" are not evaluation.
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (!std::isalpha(c)) continue;
    const auto before = i > 0 ? static_cast<unsigned char>(text[i - 1]) : '_';
    if (std::isalpha(before) && !(std::islower(before) && std::isupper(c))) continue;
    for (const std::string_view stem : {"eval", "valid", "predict"}) {
      if (text.size() - i < stem.size()) continue;
      if (std::equal(stem.begin(), stem.end(), text.begin() + static_cast<std::ptrdiff_t>(i),
                     [](char s, char t) { return s == std::tolower(static_cast<unsigned char>(t)); }))
        return true;
    }
  }
  return false;
}

}  // namespace fragscope::diagnose

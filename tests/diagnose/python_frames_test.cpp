// The Python frames of a recorded stack and which of them are torch's: stacks="all" interleaves
// C++ frames, which are dropped; torch is recognised however it is installed (a wheel in
// site-packages or dist-packages, a source tree), and not in a virtual environment that merely
// lives under a folder named torch.
#include "diagnose/python_frames.h"

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../hand_built_snapshot.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::diagnose {
namespace {

TEST(PythonFrames, TorchPathIsTheFileInsideTorchWhereverTorchIsInstalled) {
  struct Case {
    std::string_view file, inside;
  };
  for (const Case& c : {
           Case{"/usr/lib/python3/dist-packages/torch/optim/adamw.py", "optim/adamw.py"},
           Case{"/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", "nn/modules/module.py"},
           Case{"/home/me/pytorch/torch/utils/checkpoint.py", "utils/checkpoint.py"},  // a source tree
           // a virtual environment under /opt/torch holds other packages: the last site-packages decides
           Case{"/opt/torch/lib/python3.10/site-packages/transformers/models/llama/modeling_llama.py", ""},
           Case{"/venv/lib/python3.11/site-packages/torchvision/ops/boxes.py", ""},
           Case{"train.py", ""},
       }) {
    EXPECT_EQ(torch_path(c.file), c.inside) << c.file;
  }
}

TEST(PythonFrames, EvaluationIsAWordThatBeginsWithItsStem) {
  for (const std::string_view name : {"evaluate", "evaluation_loop", "_maybe_log_save_evaluate", "_EvaluationLoop",
                                      "validation_step", "run_eval", "prediction_step", "eval.py", "isValid",
                                      "EVAL_STEP", "step2eval"})
    EXPECT_TRUE(names_evaluation(name)) << name;
  // Longformer's sliding-window attention runs _mask_invalid_locations in every training forward (field lf_edge
  // ended its training step there); a retrieval model's forward is not an eval either.
  for (const std::string_view name : {"_mask_invalid_locations", "retrieval_forward", "forward", "training_step",
                                      "interval", "medieval", "unpredictable", ""})
    EXPECT_FALSE(names_evaluation(name)) << name;
}

TEST(PythonFrames, OnlyPythonFramesOutermostFirst) {
  testing::HandBuiltSnapshot b;
  const snapshot::StackId stack = b.stack({{"/pytorch/c10/cuda/CUDACachingAllocator.cpp", 1200, "malloc"},
                                           {"/venv/site-packages/torch/nn/functional.py", 2397, "silu"},
                                           {"??", 0, "torch::autograd::THPVariable_silu"},
                                           {"train.py", 40, "forward"},
                                           {"<frozen runpy>", 88, "_run_code"}});
  std::vector<std::string> files;
  for (const snapshot::FrameId f : python_frames(b.snap, stack))
    files.emplace_back(b.snap.strings.view(b.snap.stacks.frame(f).filename));
  EXPECT_EQ(files,
            (std::vector<std::string>{"<frozen runpy>", "train.py", "/venv/site-packages/torch/nn/functional.py"}));
  EXPECT_TRUE(python_frames(b.snap, 0).empty());  // the empty stack: nothing recorded
}

TEST(PythonFrames, TheRecordedStacksAreTheRecordersLoopDownToTorch) {
  // eval_spike was recorded with stacks="python": every allocation with frames starts in the
  // recorder's script, and the Python-only stacks lose nothing.
  const auto snap =
      snapshot::read_snapshot_file(std::string(FRAGSCOPE_FIXTURES_DIR) + "/eval_spike/snapshot.pickle.zst");
  std::size_t with_frames = 0, into_torch = 0;
  for (const snapshot::TraceEvent& e : snap.trace(snapshot::busiest_device(snap))) {
    const auto frames = python_frames(snap, e.stack);
    ASSERT_EQ(frames.size(), snap.stacks.stack(e.stack).size());
    if (frames.empty()) continue;
    ++with_frames;
    const std::string_view outermost = snap.strings.view(snap.stacks.frame(frames.front()).filename);
    EXPECT_TRUE(std::filesystem::path(outermost).filename() == "gen.py" || outermost.starts_with("<frozen"))
        << outermost;
    for (const snapshot::FrameId f : frames)
      if (!torch_path(snap.strings.view(snap.stacks.frame(f).filename)).empty()) {
        ++into_torch;
        break;
      }
  }
  EXPECT_GT(with_frames, 1000u);
  EXPECT_GT(into_torch, with_frames / 2);
}

}  // namespace
}  // namespace fragscope::diagnose

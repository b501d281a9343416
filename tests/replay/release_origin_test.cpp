// Telling a cache flush from a malloc's own release by the release event's stack.
#include "replay/release_origin.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace fragscope::replay {
namespace {

/// A stack of (file, function) frames, innermost first.
snapshot::StackId stack(snapshot::Snapshot& s, const std::vector<std::pair<std::string, std::string>>& frames) {
  std::vector<snapshot::FrameId> ids;
  for (const auto& [file, name] : frames) {
    ids.push_back(s.stacks.intern_frame({s.strings.intern(file), s.strings.intern(name), 1}));
  }
  return s.stacks.intern_stack(ids);
}

TEST(ReleaseOriginTest, TheInnermostAllocatorFrameDecides) {
  snapshot::Snapshot s;
  const auto cpp_flush = stack(s, {{"??", "torch::unwind::unwind()"},
                                   {"", "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::emptyCache("
                                        "std::pair<unsigned long long, unsigned long long>)"},
                                   {"", "THCPModule_emptyCache(_object*, _object*)"}});
  const auto cpp_malloc = stack(s, {{"??", "torch::unwind::unwind()"},
                                    {"CUDACachingAllocator.cpp",
                                     "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned "
                                     "long, CUstream_st*)"},
                                    {"", "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate("
                                         "unsigned long)"}});
  // Python stacks only: a user's torch.cuda.empty_cache() shows; a cuDNN call does not.
  const auto python_flush = stack(s, {{"/venv/lib/python3.12/site-packages/torch/cuda/memory.py", "empty_cache"},
                                      {"train.py", "main"}});
  const auto python_other = stack(s, {{"/venv/lib/python3.12/site-packages/torch/nn/modules/conv.py", "_conv_forward"},
                                      {"train.py", "main"}});
  // A function of the user's own named empty_cache is not PyTorch's.
  const auto user_empty_cache = stack(s, {{"train.py", "empty_cache"}});

  ReleaseOriginClassifier classifier(s);
  EXPECT_EQ(classifier.classify(cpp_flush), ReleaseOrigin::kFlush);
  EXPECT_EQ(classifier.classify(cpp_malloc), ReleaseOrigin::kMalloc);
  EXPECT_EQ(classifier.classify(python_flush), ReleaseOrigin::kFlush);
  EXPECT_EQ(classifier.classify(python_other), ReleaseOrigin::kUnknown);
  EXPECT_EQ(classifier.classify(user_empty_cache), ReleaseOrigin::kUnknown);
  EXPECT_EQ(classifier.classify(0), ReleaseOrigin::kUnknown);
  EXPECT_EQ(classifier.classify(cpp_flush), ReleaseOrigin::kFlush);  // cached: the same answer
}

}  // namespace
}  // namespace fragscope::replay

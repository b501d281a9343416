// Whether an allocation is the optimizer's own: AdamW's state and foreach temporaries are; the
// forward and backward a trainer runs inside optimizer.step(closure) are not, though torch/optim
// is on their stack too.
#include "diagnose/optimizer_code.h"

#include <gtest/gtest.h>

#include "../hand_built_snapshot.h"

namespace fragscope::diagnose {
namespace {

constexpr const char* kOptimizer = "/venv/lib/python3.11/site-packages/torch/optim/optimizer.py";
constexpr const char* kAdamW = "/venv/lib/python3.11/site-packages/torch/optim/adamw.py";
constexpr const char* kModule = "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py";
constexpr const char* kCuda = "/pytorch/c10/cuda/CUDACachingAllocator.cpp";

TEST(OptimizerCode, TheOptimizersOwnAllocationsAndNotItsClosures) {
  testing::HandBuiltSnapshot b;
  // innermost first
  const auto state = b.stack({{kCuda, 1, "malloc"},
                              {kAdamW, 410, "_multi_tensor_adamw"},
                              {kOptimizer, 480, "wrapper"},
                              {"train.py", 30, "main"}});
  const auto closure = b.stack({{kCuda, 1, "malloc"},
                                {kModule, 1736, "_call_impl"},
                                {"lightning_step.py", 12, "closure"},
                                {kOptimizer, 480, "wrapper"},
                                {"train.py", 30, "main"}});
  const auto forward = b.stack({{kModule, 1736, "_call_impl"}, {"train.py", 20, "main"}});
  const auto helper = b.stack({{"/venv/lib/python3.11/site-packages/torch/_foreach.py", 9, "add"},
                               {kAdamW, 410, "_multi_tensor_adamw"},
                               {"train.py", 30, "main"}});
  EXPECT_TRUE(made_by_optimizer(b.snap, state));
  EXPECT_TRUE(made_by_optimizer(b.snap, helper));  // torch's other modules below the optimizer
  EXPECT_FALSE(made_by_optimizer(b.snap, closure));
  EXPECT_FALSE(made_by_optimizer(b.snap, forward));
  EXPECT_FALSE(made_by_optimizer(b.snap, 0));  // no frames recorded
}

}  // namespace
}  // namespace fragscope::diagnose

#pragma once
/// @file assumptions.h
/// @brief What a plan assumes about the job, said in the same words in the text report, the
/// JSON and the canary plan: the numeric regime, the optimizer's implementation, the attention
/// kernel, the loss, the KV cache, checkpointing, the allocator setting, the sequence lengths,
/// eval; what the model leaves out; and warnings about the job itself (DDP over MIG slices).
/// Thread-safety: pure functions.

#include <string>
#include <vector>

#include "plan/job_spec.h"

namespace fragscope::plan {

struct Assumption {
  std::string key;      ///< JSON key: "precision_regime", "optimizer_implementation", …
  std::string value;    ///< the spec value it follows from: "amp-bf16", "foreach", …
  std::string meaning;  ///< what the model does with it, one sentence
};

/// @brief Every assumption of the plan of `spec`, in a fixed order.
std::vector<Assumption> assumptions(const JobSpec& spec);

/// @brief What the memory model does not model at all (docs/plan.md, "What is not modelled").
std::vector<std::string> left_out();

/// @brief Problems of the job that memory alone does not show: each one line.
std::vector<std::string> warnings(const JobSpec& spec);

}  // namespace fragscope::plan

#include "plan/memory_basis.h"

namespace fragscope::plan {

std::vector<std::string> derived_parts(const JobSpec& spec) {
  const TrainingConfig& t = spec.training;
  const Strategy strategy = spec.parallel.strategy;
  std::vector<std::string> out;
  if (t.precision == Precision::kAmpFp16) out.push_back("amp-fp16 (GradScaler)");
  if (t.precision == Precision::kMixedBf16 && strategy != Strategy::kFsdp) out.push_back("DeepSpeed bf16");
  switch (t.optimizer) {
    case Optimizer::kAdamW:
      break;
    case Optimizer::kSgd:
      if (t.optimizer_impl != OptimizerImpl::kForeach) out.push_back("SGD other than foreach");
      break;
    default:
      out.push_back(std::string(to_string(t.optimizer)));
  }
  if (t.checkpointing == Checkpointing::kSelective) out.push_back("selective checkpointing");
  if (t.attention == Attention::kFlash) out.push_back("flash attention");
  if (t.loss == Loss::kFused) out.push_back("fused linear cross-entropy");
  if (t.cpu_offload != CpuOffload::kNone) out.push_back("CPU offload");
  if (strategy == Strategy::kFsdp && spec.parallel.world_size > 1) out.push_back("FSDP over more than one rank");
  if (strategy != Strategy::kNone && strategy != Strategy::kFsdp) out.push_back(std::string(to_string(strategy)));
  if (spec.model.tied_embeddings) out.push_back("tied embeddings");
  if (spec.hardware.gpu != "H200") out.push_back("a GPU other than the H200");
  if (!spec.hardware.mig.empty()) out.push_back("a MIG slice");
  alloc::AllocConfig recorded_options = spec.hardware.alloc_config;
  const alloc::AllocConfig defaults;
  recorded_options.expandable_segments = defaults.expandable_segments;
  recorded_options.max_split_size = defaults.max_split_size;
  recorded_options.roundup_power2_divisions = defaults.roundup_power2_divisions;
  if (!(recorded_options == defaults)) out.push_back("allocator options other than the recorded ones");
  return out;
}

std::string memory_basis(const JobSpec& spec) { return derived_parts(spec).empty() ? "measured" : "derived"; }

}  // namespace fragscope::plan

#include "plan/proposals.h"

#include <algorithm>

#include <fmt/format.h>

#include "alloc/alloc_config.h"
#include "plan/memory_basis.h"
#include "plan/throughput_model.h"
#include "util/bytes.h"
#include "util/error.h"
#include "util/gpu_catalog.h"

namespace fragscope::plan {
namespace {

/// Sets grad_accum so that the job reaches `target` sequences per optimizer step.
/// @return why it cannot (grad_accum then unchanged): micro_batch_size × world_size does not divide
/// the target, or it would take more micro-steps than a job may (whose replay would not be bounded).
std::string keep_global_batch(JobSpec& s, std::uint64_t target) {
  const std::uint64_t per_accum = s.training.micro_batch_size * s.parallel.world_size;
  if (per_accum == 0 || target % per_accum != 0)
    return fmt::format("global batch {} is not a multiple of micro_batch_size {} × world_size {}", target,
                       s.training.micro_batch_size, s.parallel.world_size);
  if (target / per_accum > kMaxGradAccum)
    return fmt::format("global batch {} needs grad_accum {}, beyond 1 Mi micro-steps per optimizer step", target,
                       target / per_accum);
  s.training.grad_accum = target / per_accum;
  return "";
}

std::string alloc_conf_with_expandable(const JobSpec& s) {
  alloc::AllocConfig c = s.hardware.alloc_config;
  c.expandable_segments = true;
  return alloc::to_alloc_conf(c);
}

class Builder {
 public:
  /// @param base_within_limit the job the proposals start from is already within the limit
  Builder(const JobSpec& specified, const JobSpec& base, std::uint64_t target, bool base_within_limit)
      : specified_(specified), base_(base), target_(target), base_within_limit_(base_within_limit) {}

  /// `overrides` are --set arguments (table.key=value); `why` explains the throughput cost.
  Proposal make(std::string name, std::vector<std::string> overrides, JobSpec spec, std::string why) const {
    Proposal p;
    p.name = std::move(name);
    p.overrides = std::move(overrides);
    if (std::string problem = keep_global_batch(spec, target_); !problem.empty()) {
      p.workable = false;
      p.problem = std::move(problem);
    } else if (spec.training.grad_accum != specified_.training.grad_accum) {
      p.overrides.push_back(fmt::format("training.grad_accum={}", spec.training.grad_accum));
    }
    for (const auto& o : p.overrides) p.change += (p.change.empty() ? "" : ", ") + o;
    p.spec = std::move(spec);
    p.estimate = estimate_memory(p.spec);
    p.throughput_factor = throughput_factor(specified_, p.spec);
    p.cost = throughput_cost_text(p.throughput_factor);
    if (!why.empty()) p.cost += ": " + why;
    p.memory_basis = memory_basis(p.spec);
    return p;
  }
  const JobSpec& base() const { return base_; }
  bool base_within_limit() const { return base_within_limit_; }

 private:
  const JobSpec& specified_;
  const JobSpec& base_;
  std::uint64_t target_;
  bool base_within_limit_;
};

void add_checkpointing(const Builder& b, std::vector<Proposal>& out) {
  const JobSpec& base = b.base();
  const std::uint64_t layers = base.model.num_layers;
  const bool all = base.training.checkpointing == Checkpointing::kFull && !base.training.checkpointed_layers;
  if (!all) {
    JobSpec s = base;
    s.training.checkpointing = Checkpointing::kFull;
    s.training.checkpointed_layers.reset();
    out.push_back(b.make("activation checkpointing: full", {"training.activation_checkpointing=full"}, s,
                         "every block's forward runs twice"));
    // The fewest checkpointed blocks within the HBM limit, when all of them are and none are not.
    if (out.back().estimate.within_hbm_limit && !b.base_within_limit() && layers > 1) {
      std::uint64_t lo = base.training.checkpointed_layers.value_or(0) + 1, hi = layers;
      std::optional<Proposal> best;
      while (lo < hi) {
        const std::uint64_t k = (lo + hi) / 2;
        s.training.checkpointed_layers = k;
        Proposal p =
            b.make(fmt::format("activation checkpointing: {} of {} blocks", k, layers),
                   {"training.activation_checkpointing=full", fmt::format("training.checkpointed_layers={}", k)}, s,
                   fmt::format("{} of {} blocks' forward runs twice", k, layers));
        if (p.estimate.within_hbm_limit)
          hi = k, best = std::move(p);
        else
          lo = k + 1;
      }
      if (best) out.push_back(std::move(*best));
    }
  }
  if (base.training.checkpointing == Checkpointing::kNone) {
    JobSpec s = base;
    s.training.checkpointing = Checkpointing::kSelective;
    Proposal p = b.make("activation checkpointing: selective", {"training.activation_checkpointing=selective"}, s,
                        "the attention core runs twice");
    if (base.training.attention != Attention::kEager)
      p.problem = "SDPA/flash attention keeps no s×s scores, so selective recompute saves almost nothing";
    out.push_back(std::move(p));
  }
}

void add_micro_batches(const Builder& b, std::vector<Proposal>& out) {
  const JobSpec& base = b.base();
  for (std::uint64_t mbs = base.training.micro_batch_size / 2; mbs >= 1; mbs /= 2) {
    JobSpec s = base;
    s.training.micro_batch_size = mbs;
    const std::string why = s.parallel.strategy == Strategy::kFsdp || s.parallel.strategy == Strategy::kZero3
                                ? "smaller GEMMs, and FSDP gathers every parameter twice per micro-step"
                                : "smaller GEMMs";
    out.push_back(b.make(fmt::format("micro-batch {} (grad_accum up)", mbs),
                         {fmt::format("training.micro_batch_size={}", mbs)}, s, why));
    if (!s.hardware.alloc_config.expandable_segments) {
      s.hardware.alloc_config.expandable_segments = true;
      out.push_back(b.make(fmt::format("micro-batch {} + expandable_segments", mbs),
                           {fmt::format("training.micro_batch_size={}", mbs),
                            fmt::format("hardware.alloc_conf=\"{}\"", alloc_conf_with_expandable(base))},
                           s, why));
    }
    if (mbs == 1) break;
  }
}

void add_allocator_and_optimizer(const Builder& b, std::vector<Proposal>& out) {
  const JobSpec& base = b.base();
  if (!base.hardware.alloc_config.expandable_segments) {
    JobSpec s = base;
    s.hardware.alloc_config.expandable_segments = true;
    out.push_back(b.make("expandable_segments",
                         {fmt::format("hardware.alloc_conf=\"{}\"", alloc_conf_with_expandable(base))}, s,
                         "an allocator setting (torchrec PR #4375: negligible)"));
  }
  const bool deepspeed = base.parallel.strategy == Strategy::kZero1 || base.parallel.strategy == Strategy::kZero2 ||
                         base.parallel.strategy == Strategy::kZero3;
  const bool adam = base.training.optimizer == Optimizer::kAdamW || base.training.optimizer == Optimizer::kAdam;
  if (adam && !deepspeed && base.training.cpu_offload == CpuOffload::kNone) {
    if (base.training.optimizer_impl != OptimizerImpl::kFused) {
      JobSpec s = base;
      s.training.optimizer_impl = OptimizerImpl::kFused;
      out.push_back(b.make("AdamW fused=True", {"training.optimizer_impl=fused"}, s,
                           "one fused kernel: no sqrt temporaries"));
    }
    if (base.training.optimizer_impl == OptimizerImpl::kForeach) {
      JobSpec s = base;
      s.training.optimizer_impl = OptimizerImpl::kSingleTensor;
      out.push_back(b.make("AdamW foreach=False", {"training.optimizer_impl=single-tensor"}, s,
                           "one tensor at a time: a slower optimizer step"));
    }
  }
  if (adam) {
    JobSpec s = base;
    s.training.optimizer = Optimizer::kAdamW8bit;
    Proposal p = b.make("8-bit AdamW (bitsandbytes)", {"training.optimizer=adamw-8bit"}, s,
                        "bitsandbytes' fused 8-bit update");
    p.changes_numerics = true;
    p.problem = "changes the optimizer (8-bit block-quantized state): validate the loss curve";
    out.push_back(std::move(p));
  }
  if (base.training.cpu_offload == CpuOffload::kNone) {
    if (base.parallel.strategy == Strategy::kFsdp) {
      JobSpec s = base;
      s.training.cpu_offload = CpuOffload::kParameters;
      out.push_back(b.make("CPU offload (FSDP2 CPUOffloadPolicy)", {"training.cpu_offload=parameters"}, s,
                           "shards over PCIe every step, Adam on the host"));
    } else if (deepspeed) {
      JobSpec s = base;
      s.training.cpu_offload = CpuOffload::kOptimizer;
      out.push_back(b.make("CPU offload (ZeRO-Offload optimizer)", {"training.cpu_offload=optimizer"}, s,
                           "gradients and parameters over PCIe, Adam on the host"));
    }
  }
}

void add_loss_and_cache(const Builder& b, std::vector<Proposal>& out) {
  const JobSpec& base = b.base();
  if (base.training.loss == Loss::kStandard) {
    JobSpec s = base;
    s.training.loss = Loss::kChunked;
    out.push_back(b.make(fmt::format("chunked cross-entropy ({} tokens)", s.training.loss_chunk_tokens),
                         {"training.loss=chunked"}, s, "lm_head runs twice"));
    s.training.loss = Loss::kFused;
    out.push_back(
        b.make("fused linear cross-entropy (Liger)", {"training.loss=fused"}, s, "no logits materialized"));
  }
  if (base.training.use_cache && base.training.checkpointing != Checkpointing::kFull) {
    JobSpec s = base;
    s.training.use_cache = false;
    out.push_back(b.make("use_cache=False", {"training.use_cache=false"}, s,
                         "the training forward stops building a KV cache nobody reads"));
  }
}

void add_more_gpus(const Builder& b, std::vector<Proposal>& out) {
  const JobSpec& base = b.base();
  const Strategy strategy = base.parallel.strategy;
  const bool replicated = strategy == Strategy::kNone || strategy == Strategy::kDdp;
  for (std::uint64_t factor : {2, 4}) {
    JobSpec s = base;
    s.parallel.world_size = base.parallel.world_size * factor;
    if (replicated) {
      JobSpec ddp = s;
      ddp.parallel.strategy = Strategy::kDdp;
      Proposal p = b.make(fmt::format("ddp over {} GPUs", ddp.parallel.world_size),
                          {"parallel.strategy=ddp", fmt::format("parallel.world_size={}", ddp.parallel.world_size)},
                          ddp, fmt::format("{}× the GPUs", factor));
      p.workable = false;
      p.problem =
          "DDP keeps a full replica (parameters, gradients, optimizer state) on every GPU: more GPUs do not "
          "lower per-GPU memory";
      out.push_back(std::move(p));
      s.parallel.strategy = Strategy::kFsdp;
      if (s.training.precision == Precision::kMixedBf16) s.training.precision = Precision::kAmpBf16;
    }
    Proposal p = b.make(fmt::format("{} over {} GPUs", to_string(s.parallel.strategy), s.parallel.world_size),
                        {fmt::format("parallel.strategy={}", to_string(s.parallel.strategy)),
                         fmt::format("parallel.world_size={}", s.parallel.world_size)},
                        s, fmt::format("{}× the GPUs; per GPU, minus the sharding collectives", factor));
    p.more_hardware = true;
    if (!base.hardware.mig.empty()) {
      p.workable = false;
      p.problem = "more GPUs as MIG slices: MIG instances have no P2P/NVLink for the sharding collectives";
    }
    out.push_back(std::move(p));
  }
}

void add_mig_slices(const Builder& b, std::vector<Proposal>& out) {
  const JobSpec& base = b.base();
  const GpuSpec& gpu = *find_gpu(base.hardware.gpu);
  const MigProfile* current = base.hardware.mig.empty() ? nullptr : find_mig_profile(gpu, base.hardware.mig);
  const int current_slices = current ? current->compute_slices : 7;
  const std::uint64_t current_memory = current ? current->memory_bytes : gpu.total_bytes;
  for (const MigProfile& profile : gpu.mig_profiles) {
    if (current && current->name == profile.name) continue;
    JobSpec s = base;
    s.hardware.mig = std::string(profile.name);
    Proposal p = b.make(fmt::format("MIG {} ({}, {} per card)", profile.name, format_bytes(profile.memory_bytes),
                                    profile.max_instances),
                        {fmt::format("hardware.mig={}", profile.name)}, s,
                        fmt::format("{}/7 of the SMs (now {}/7)", profile.compute_slices, current_slices));
    p.more_hardware = profile.memory_bytes > current_memory || profile.compute_slices > current_slices;
    if (base.parallel.world_size > 1) {
      p.workable = false;
      p.problem =
          "MIG instances have no GPU-to-GPU P2P/NVLink: a multi-GPU job cannot run its collectives across "
          "slices at NVLink speed";
    }
    out.push_back(std::move(p));
  }
}

void add_combinations(const Builder& b, std::vector<Proposal>& out) {
  if (b.base().training.checkpointing == Checkpointing::kFull) return;
  JobSpec s = b.base();
  s.training.checkpointing = Checkpointing::kFull;
  if (!s.hardware.alloc_config.expandable_segments) {
    JobSpec e = s;
    e.hardware.alloc_config.expandable_segments = true;
    out.push_back(b.make("full checkpointing + expandable_segments",
                         {"training.activation_checkpointing=full",
                          fmt::format("hardware.alloc_conf=\"{}\"", alloc_conf_with_expandable(b.base()))},
                         e, "every block's forward runs twice"));
  }
  if (s.training.micro_batch_size > 1) {
    JobSpec m = s;
    m.training.micro_batch_size = 1;
    out.push_back(b.make("full checkpointing + micro-batch 1",
                         {"training.activation_checkpointing=full", "training.micro_batch_size=1"}, m,
                         "every block's forward runs twice, smaller GEMMs"));
  }
}

std::string margin_text(const MemoryEstimate& e) {
  return e.margin_bytes >= 0 ? fmt::format("{} to spare", format_bytes(static_cast<std::uint64_t>(e.margin_bytes)))
                             : fmt::format("short by {}", format_bytes(static_cast<std::uint64_t>(-e.margin_bytes)));
}

}  // namespace

ProposalSet propose(const JobSpec& spec, const MemoryEstimate& current,
                    std::optional<std::uint64_t> target_global_batch) {
  ProposalSet set;
  set.current = current;
  set.current_global_batch = spec.global_batch();
  set.target_global_batch = target_global_batch.value_or(spec.training.global_batch.value_or(set.current_global_batch));
  const std::uint64_t target = set.target_global_batch;
  if (target > kMaxGlobalBatch)  // grad_accum and the canary's micro-steps are derived from it
    throw InputError(fmt::format("global batch {} is beyond 2^40 sequences; not a real training job", target));
  if (target % spec.parallel.world_size != 0)
    throw InputError(fmt::format("--global-batch {}: not a multiple of world_size {}; no micro-batch reaches it",
                                 target, spec.parallel.world_size));

  JobSpec base = spec;
  const bool retarget = target != set.current_global_batch;
  const Builder specified(spec, spec, target, current.within_hbm_limit);
  bool base_within_limit = current.within_hbm_limit;
  if (retarget) {
    JobSpec s = spec;
    keep_global_batch(s, target);
    set.proposals.push_back(
        specified.make(fmt::format("global batch {}", target), {}, s, "grad_accum changes; per token the same work"));
    if (set.proposals.back().workable)
      base = s, base_within_limit = set.proposals.back().estimate.within_hbm_limit;
    else
      base_within_limit = false;  // nothing reaches the target as the job stands
  }
  // Every proposal starts from the job with the target global batch (when grad_accum reaches it).
  const Builder builder(spec, base, target, base_within_limit);
  add_checkpointing(builder, set.proposals);
  add_micro_batches(builder, set.proposals);
  add_allocator_and_optimizer(builder, set.proposals);
  add_loss_and_cache(builder, set.proposals);
  add_more_gpus(builder, set.proposals);
  add_mig_slices(builder, set.proposals);
  add_combinations(builder, set.proposals);

  // Same hardware, then exact numerics, then the highest throughput; ties to the lower reserved.
  auto better = [](const Proposal& p, const Proposal& best) {
    if (p.more_hardware != best.more_hardware) return !p.more_hardware;
    if (p.changes_numerics != best.changes_numerics) return !p.changes_numerics;
    if (p.throughput_factor > best.throughput_factor + 1e-9) return true;
    return p.throughput_factor > best.throughput_factor - 1e-9 &&
           p.estimate.peak_reserved_bytes < best.estimate.peak_reserved_bytes;
  };
  for (std::size_t i = 0; i < set.proposals.size(); ++i) {
    const Proposal& p = set.proposals[i];
    if (!p.workable || !p.estimate.within_hbm_limit) continue;
    if (!set.recommended || better(p, set.proposals[*set.recommended])) set.recommended = i;
  }
  if (current.within_hbm_limit && !retarget) {
    set.recommended.reset();
    set.recommendation = fmt::format(
        "keep the job as specified: peak reserved {} ({} of the device, within the "
        "canary's {}), {}",
        format_bytes(current.peak_reserved_bytes), percent_text(current.hbm_fraction()), percent_text(kMaxHbmFraction),
        margin_text(current));
  } else if (set.recommended) {
    const Proposal& p = set.proposals[*set.recommended];
    set.recommendation = fmt::format(
        "{} ({}): peak reserved {} ({} of the device, within the canary's {}), the highest throughput among the "
        "proposals within it on this hardware ({})",
        p.name, p.change, format_bytes(p.estimate.peak_reserved_bytes), percent_text(p.estimate.hbm_fraction()),
        percent_text(kMaxHbmFraction), p.cost);
  } else {
    set.recommendation = fmt::format("no proposal stays within {} of the device: combine them or choose a larger GPU",
                                     percent_text(kMaxHbmFraction));
  }
  return set;
}

LargestFit largest_fit(const JobSpec& spec) {
  LargestFit fit;
  auto search = [&](auto apply, std::uint64_t hi, std::uint64_t step, std::optional<std::uint64_t>& best,
                    std::optional<MemoryEstimate>& at) {
    // the largest value in [step, hi] (multiples of step) within the HBM limit; doubling first
    std::uint64_t lo = 0, probe = step;
    auto fits = [&](std::uint64_t v) {
      JobSpec s = spec;
      apply(s, v);
      try {
        validate(s);  // past a real job's range the model's arithmetic would wrap: no fit
      } catch (const InputError&) {
        return false;
      }
      MemoryEstimate e = estimate_memory(s);
      if (!e.within_hbm_limit) return false;
      best = v, at = std::move(e);
      return true;
    };
    while (probe <= hi && fits(probe)) lo = probe, probe *= 2;
    std::uint64_t top = std::min(probe, hi + step);  // first known (or assumed) not to fit
    while (lo && top - lo > step) {
      const std::uint64_t mid = (lo + top) / 2 / step * step;
      if (mid <= lo) break;
      if (fits(mid))
        lo = mid;
      else
        top = mid;
    }
  };
  search(
      [](JobSpec& s, std::uint64_t v) {
        s.training.micro_batch_size = v;
        s.training.global_batch.reset();
      },
      1u << 16, 1, fit.micro_batch_size, fit.at_micro_batch);
  search(
      [](JobSpec& s, std::uint64_t v) {
        s.training.seq_len = v;
        if (s.training.min_seq_len) s.training.min_seq_len = std::min(*s.training.min_seq_len, v);
        if (s.training.median_seq_len) s.training.median_seq_len = std::min(*s.training.median_seq_len, v);
      },
      1u << 20, 8, fit.seq_len, fit.at_seq_len);
  return fit;
}

}  // namespace fragscope::plan

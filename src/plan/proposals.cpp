#include "plan/proposals.h"

#include <fmt/format.h>

#include "util/bytes.h"
#include "util/error.h"
#include "util/gpu_catalog.h"

namespace fragscope::plan {
namespace {

constexpr double kFullRecomputeFactor = 0.75;      // +1 forward ≈ +1/3 step time
constexpr double kSelectiveRecomputeFactor = 0.973;  // Korthikanti et al.: +2.7% FLOPs
constexpr std::uint64_t kEfficientMicroBatchTokens = 8192;
constexpr double kSmallMicroBatchFactor = 0.95;

/// Sets grad_accum so that the job reaches `target` sequences per optimizer step.
/// @return false when mbs × world does not divide the target.
bool keep_global_batch(JobSpec& s, std::uint64_t target) {
  const std::uint64_t per_accum = s.training.micro_batch_size * s.parallel.world_size;
  if (per_accum == 0 || target % per_accum != 0) return false;
  s.training.grad_accum = target / per_accum;
  return true;
}

class Builder {
 public:
  /// @param specified_grad_accum the user's grad_accum: a proposal that changes it says so.
  Builder(const JobSpec& base, std::uint64_t target, std::uint64_t specified_grad_accum)
      : base_(base), target_(target), specified_grad_accum_(specified_grad_accum) {}

  Proposal make(std::string name, std::string change, JobSpec spec, double factor, std::string cost) const {
    Proposal p;
    p.name = std::move(name);
    p.change = std::move(change);
    if (!keep_global_batch(spec, target_)) {
      p.workable = false;
      p.problem = fmt::format("global batch {} is not a multiple of micro_batch_size {} × world_size {}", target_,
                              spec.training.micro_batch_size, spec.parallel.world_size);
    } else if (spec.training.grad_accum != specified_grad_accum_ && !p.change.starts_with("[training] grad_accum")) {
      p.change += fmt::format("; [training] grad_accum = {}", spec.training.grad_accum);
    }
    p.spec = std::move(spec);
    p.estimate = estimate_memory(p.spec);
    p.throughput_factor = factor;
    p.cost = std::move(cost);
    return p;
  }
  const JobSpec& base() const { return base_; }

 private:
  JobSpec base_;
  std::uint64_t target_;
  std::uint64_t specified_grad_accum_;
};

std::string percent_cost(double factor) {
  if (factor > 1.0005) return fmt::format("+{:.1f}% tokens/s per GPU", (factor - 1.0) * 100.0);
  if (factor >= 0.9995) return "none";
  return fmt::format("−{:.1f}% tokens/s per GPU", (1.0 - factor) * 100.0);
}

void add_checkpointing(const Builder& b, std::vector<Proposal>& out) {
  const JobSpec& base = b.base();
  if (base.training.checkpointing != Checkpointing::kFull) {
    JobSpec s = base;
    s.training.checkpointing = Checkpointing::kFull;
    out.push_back(b.make("activation checkpointing: full", "[training] activation_checkpointing = \"full\"", s,
                         kFullRecomputeFactor, "recomputes every block's forward: " + percent_cost(kFullRecomputeFactor)));
  }
  if (base.training.checkpointing == Checkpointing::kNone) {
    JobSpec s = base;
    s.training.checkpointing = Checkpointing::kSelective;
    Proposal p = b.make("activation checkpointing: selective", "[training] activation_checkpointing = \"selective\"",
                        s, kSelectiveRecomputeFactor,
                        "recomputes attention scores only: " + percent_cost(kSelectiveRecomputeFactor));
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
    const bool small = mbs * s.training.seq_len < kEfficientMicroBatchTokens;
    const double factor = small ? kSmallMicroBatchFactor : 1.0;
    const std::string cost = small ? fmt::format("{} tokens per micro-batch: smaller GEMMs, ~{}",
                                                 mbs * s.training.seq_len, percent_cost(factor))
                                   : "none expected (≥ 8192 tokens per micro-batch)";
    out.push_back(b.make(fmt::format("micro-batch {} (grad_accum up)", mbs),
                         fmt::format("[training] micro_batch_size = {}", mbs), s, factor, cost));
    if (!s.hardware.expandable_segments) {
      s.hardware.expandable_segments = true;
      out.push_back(b.make(fmt::format("micro-batch {} + expandable_segments", mbs),
                           fmt::format("[training] micro_batch_size = {}; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                                       mbs),
                           s, factor, cost));
    }
    if (mbs == 1) break;
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
                          fmt::format("[parallel] strategy = \"ddp\", world_size = {}", ddp.parallel.world_size), ddp,
                          1.0, fmt::format("{}× the GPUs", factor));
      p.workable = false;
      p.problem = "DDP keeps a full replica (parameters, gradients, optimizer state) on every GPU: more GPUs do not "
                  "lower per-GPU memory";
      out.push_back(std::move(p));
      s.parallel.strategy = Strategy::kFsdp;
    }
    Proposal p = b.make(fmt::format("{} over {} GPUs", to_string(s.parallel.strategy), s.parallel.world_size),
                        fmt::format("[parallel] strategy = \"{}\", world_size = {}", to_string(s.parallel.strategy),
                                    s.parallel.world_size),
                        s, 1.0, fmt::format("{}× the GPUs; per-GPU throughput minus sharding traffic", factor));
    p.more_hardware = true;
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
    const double factor = static_cast<double>(profile.compute_slices) / current_slices;
    Proposal p = b.make(fmt::format("MIG {} ({}, {} per card)", profile.name, format_bytes(profile.memory_bytes),
                                    profile.max_instances),
                        fmt::format("[hardware] mig = \"{}\"", profile.name), s, factor,
                        fmt::format("{}/7 of the SMs (now {}/7): {}", profile.compute_slices, current_slices,
                                    percent_cost(factor)));
    p.more_hardware = profile.memory_bytes > current_memory || profile.compute_slices > current_slices;
    if (base.parallel.world_size > 1) {
      p.workable = false;
      p.problem = "MIG instances have no GPU-to-GPU P2P/NVLink: a multi-GPU job cannot run its collectives across "
                  "slices at NVLink speed";
    }
    out.push_back(std::move(p));
  }
}

void add_expandable_segments(const Builder& b, std::vector<Proposal>& out) {
  if (b.base().hardware.expandable_segments) return;
  JobSpec s = b.base();
  s.hardware.expandable_segments = true;
  out.push_back(b.make("expandable_segments", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", s, 1.0,
                       "none measurable (allocator setting: less headroom above allocated)"));
}

void add_combinations(const Builder& b, std::vector<Proposal>& out) {
  if (b.base().training.checkpointing == Checkpointing::kFull) return;
  JobSpec s = b.base();
  s.training.checkpointing = Checkpointing::kFull;
  if (!s.hardware.expandable_segments) {
    JobSpec e = s;
    e.hardware.expandable_segments = true;
    out.push_back(b.make("full checkpointing + expandable_segments",
                         "[training] activation_checkpointing = \"full\"; "
                         "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                         e, kFullRecomputeFactor, percent_cost(kFullRecomputeFactor)));
  }
  if (s.training.micro_batch_size > 1) {
    JobSpec m = s;
    m.training.micro_batch_size = 1;
    const double factor = kFullRecomputeFactor * (m.training.seq_len < kEfficientMicroBatchTokens ? kSmallMicroBatchFactor : 1.0);
    out.push_back(b.make("full checkpointing + micro-batch 1",
                         "[training] activation_checkpointing = \"full\", micro_batch_size = 1", m, factor,
                         percent_cost(factor)));
  }
}

std::string margin_text(const MemoryEstimate& e) {
  return e.fits ? fmt::format("{} to spare", format_bytes(static_cast<std::uint64_t>(e.margin_bytes)))
                : fmt::format("short by {}", format_bytes(static_cast<std::uint64_t>(-e.margin_bytes)));
}

}  // namespace

ProposalSet propose(const JobSpec& spec, std::optional<std::uint64_t> target_global_batch) {
  ProposalSet set;
  set.current = estimate_memory(spec);
  set.current_global_batch = spec.global_batch();
  if (!target_global_batch) target_global_batch = spec.training.global_batch;
  set.target_global_batch = target_global_batch;
  const std::uint64_t target = target_global_batch.value_or(set.current_global_batch);
  if (target > kMaxGlobalBatch)  // grad_accum and the canary's micro-steps are derived from it
    throw InputError(fmt::format("global batch {} is beyond 2^40 sequences; not a real training job", target));

  JobSpec base = spec;
  const bool retarget = target != set.current_global_batch;
  if (retarget) {
    Builder plain(spec, target, spec.training.grad_accum);
    JobSpec s = spec;
    const bool exact = keep_global_batch(s, target);
    set.proposals.push_back(plain.make(
        fmt::format("global batch {}: grad_accum {}", target, s.training.grad_accum),
        fmt::format("[training] grad_accum = {}", s.training.grad_accum), s, 1.0,
        fmt::format("none per token; {}× the steps' wall time per optimizer step",
                    static_cast<double>(target) / static_cast<double>(set.current_global_batch))));
    if (exact) base = s;
  }
  Builder builder(base, base.global_batch(), spec.training.grad_accum);  // the target when reachable, else today's
  add_checkpointing(builder, set.proposals);
  add_micro_batches(builder, set.proposals);
  add_expandable_segments(builder, set.proposals);
  add_more_gpus(builder, set.proposals);
  add_mig_slices(builder, set.proposals);
  add_combinations(builder, set.proposals);

  // Same hardware before more hardware; then the highest throughput; ties to the larger margin.
  auto better = [](const Proposal& p, const Proposal& best) {
    if (p.more_hardware != best.more_hardware) return !p.more_hardware;
    if (p.throughput_factor > best.throughput_factor + 1e-9) return true;
    return p.throughput_factor > best.throughput_factor - 1e-9 && p.estimate.margin_bytes > best.estimate.margin_bytes;
  };
  for (std::size_t i = 0; i < set.proposals.size(); ++i) {
    const Proposal& p = set.proposals[i];
    if (!p.workable || !p.estimate.within_hbm_limit) continue;
    if (!set.recommended || better(p, set.proposals[*set.recommended])) set.recommended = i;
  }
  const bool current_ok = set.current.within_hbm_limit && !retarget;
  if (current_ok) {
    set.recommended.reset();
    set.recommendation = fmt::format("keep the job as specified: it fits with {}, under {:.0f}% of the device",
                                     margin_text(set.current), kMaxHbmFraction * 100);
  } else if (set.recommended) {
    const Proposal& p = set.proposals[*set.recommended];
    set.recommendation = fmt::format(
        "{}: {}; peak reserved {} ({:.0f}% of the device, under the canary's {:.0f}%) at the lowest throughput "
        "cost among the proposals that stay under it ({})",
        p.name, p.change, format_bytes(p.estimate.peak_reserved_bytes),
        100.0 * static_cast<double>(p.estimate.peak_reserved_bytes) / static_cast<double>(p.estimate.device_bytes),
        kMaxHbmFraction * 100, p.cost);
  } else {
    set.recommendation = fmt::format("no proposal stays under {:.0f}% of the device: combine them or choose a larger GPU",
                                     kMaxHbmFraction * 100);
  }
  return set;
}

}  // namespace fragscope::plan

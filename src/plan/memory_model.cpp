#include "plan/memory_model.h"

#include <algorithm>
#include <cmath>

#include "plan/activation_model.h"
#include "plan/sharding.h"
#include "util/bytes.h"
#include "util/gpu_catalog.h"

namespace fragscope::plan {

std::uint64_t PhasePeak::item(std::string_view key) const {
  for (const auto& i : items)
    if (i.key == key) return i.bytes;
  return 0;
}

namespace {

// PyTorch sizes each cuBLAS handle's workspace at 32 MiB on Hopper and newer; the forward runs on
// the Python thread's handle, the backward on the autograd thread's (two 32 MiB blocks in every
// fixture after the first backward).
constexpr std::uint64_t kCublasWorkspace = 32 * kMiB;
// NCCL: NCCL_BUFFSIZE (4 MiB) per channel, peer and protocol; ~0.5 GiB per communicator on
// 8-GPU NVLink nodes. Outside PyTorch's allocator, like the CUDA context.
constexpr std::uint64_t kNcclBuffers = 512 * kMiB;

class PhaseBuilder {
 public:
  explicit PhaseBuilder(std::string_view phase) { peak_.phase = phase; }
  PhaseBuilder& add(std::string_view key, std::uint64_t bytes) {
    if (bytes == 0) return *this;
    for (auto& item : peak_.items)
      if (item.key == key) {
        item.bytes += bytes;
        peak_.bytes += bytes;
        return *this;
      }
    peak_.items.push_back({key, bytes});
    peak_.bytes += bytes;
    return *this;
  }
  PhasePeak build() { return std::move(peak_); }

 private:
  PhasePeak peak_;
};

/// Everything that outlives a micro-step, as the micro-step sees it.
void add_persistent(PhaseBuilder& b, const StateBytes& s, const StepState& state) {
  b.add("parameters", s.parameters);
  if (state.gradients) b.add("gradients", s.gradients);
  if (state.optimizer_state) b.add("optimizer_state", s.optimizer_state);
  b.add("ddp_buckets", s.ddp_buckets);
  b.add("sharding_buffers", s.gathered_outer);
  b.add("cublas_workspace", kCublasWorkspace * (state.backward_ran ? 2 : 1));
}

}  // namespace

std::vector<PhasePeak> micro_step_phases(const JobSpec& spec, const StepState& state) {
  const ActivationModel a = activation_model(spec);
  const StateBytes s = state_bytes(spec);
  const ModelShape& m = spec.model;
  const std::uint64_t tokens = spec.training.micro_batch_size * spec.training.seq_len;
  const std::uint64_t layers = m.num_layers;
  const bool full = spec.training.checkpointing == Checkpointing::kFull;
  const std::uint64_t per_step = a.rope_bytes + a.attention_mask_bytes;
  const std::uint64_t lm_head_copy = a.weight_copy_bytes ? 2 * m.vocab_size * m.hidden_size : 0;
  const std::uint64_t layer_copy = a.weight_copy_bytes ? 2 * m.layer_matmul_parameters() : 0;
  const std::uint64_t kept_per_layer = full ? a.checkpoint_per_layer : a.saved_per_layer;
  std::vector<PhasePeak> phases;

  {  // The loss forward: the whole graph, the KV cache and three logits-sized tensors.
    PhaseBuilder b("forward (loss)");
    add_persistent(b, s, state);
    b.add("activations", layers * tokens * kept_per_layer + tokens * a.final_forward + per_step);
    b.add("kv_cache", layers * tokens * a.kv_cache_per_layer);
    b.add("weight_copies", a.weight_copy_bytes);
    b.add("logits_and_loss", tokens * a.logits_forward);
    phases.push_back(b.build());
  }
  if (full && a.scores_forward_transient) {  // a checkpointed eager block's no-grad scores
    PhaseBuilder b("forward (checkpointed block)");
    add_persistent(b, s, state);
    b.add("activations", layers * tokens * a.checkpoint_per_layer + per_step);
    b.add("weight_copies", a.weight_copy_bytes);
    b.add("backward_transients", tokens * a.scores_forward_transient);
    b.add("sharding_buffers", s.gathered_layers);
    phases.push_back(b.build());
  }
  {  // The loss backward: the model output (cache, bf16 logits) is gone, log_softmax's grads are not.
    PhaseBuilder b("backward (loss)");
    add_persistent(b, s, state);
    b.add("activations", layers * tokens * kept_per_layer + tokens * a.final_backward + per_step);
    b.add("weight_copies", full ? lm_head_copy : a.weight_copy_bytes);
    b.add("logits_and_loss", tokens * a.logits_backward);
    phases.push_back(b.build());
  }
  {  // Block by block, top first; keep the worst moment.
    const std::string_view name = full ? "backward (block recompute)" : "backward (blocks)";
    auto moment = [&](std::uint64_t grads, std::uint64_t kept, std::uint64_t copies, std::uint64_t transients) {
      PhaseBuilder b(name);
      add_persistent(b, s, StepState{false, state.optimizer_state, true});
      b.add("gradients", grads);
      b.add("activations", kept + per_step);
      b.add("weight_copies", copies);
      b.add("backward_transients", transients);
      b.add("sharding_buffers", s.gathered_layers);
      return b.build();
    };
    PhasePeak worst;
    std::uint64_t grads = state.gradients ? s.gradients : s.outer_gradients;
    for (std::uint64_t k = 0; k < layers; ++k) {
      const std::uint64_t remaining = layers - k;
      const std::uint64_t kept = full ? remaining * tokens * a.checkpoint_per_layer + tokens * a.saved_per_layer
                                      : remaining * tokens * a.saved_per_layer;
      const std::uint64_t copies = full ? layer_copy : remaining * layer_copy;
      // Entering the block's backward (its MLP gradients start), then its attention backward
      // (the MLP half is freed; in a first micro-step the MLP weight grads now exist).
      const std::uint64_t mlp_grads = state.gradients ? 0 : s.mlp_gradients_per_layer;
      for (PhasePeak candidate :
           {moment(grads, kept, copies, tokens * a.block_backward_transient + a.weight_grad_transient),
            moment(grads + mlp_grads, kept - tokens * a.mlp_saved_per_layer, copies,
                   tokens * (a.attention_backward_transient + 4 * m.hidden_size))})
        if (candidate.bytes > worst.bytes) worst = std::move(candidate);
      if (!state.gradients) grads += s.gradients_per_layer;
    }
    phases.push_back(std::move(worst));
  }
  return phases;
}

PhasePeak optimizer_step_phase(const JobSpec& spec) {
  const StateBytes s = state_bytes(spec);
  PhaseBuilder b("optimizer step");
  b.add("parameters", s.parameters);
  b.add("gradients", s.gradients);
  b.add("optimizer_state", s.optimizer_state);
  b.add("optimizer_temporaries", s.optimizer_temporaries);
  b.add("ddp_buckets", s.ddp_buckets);
  b.add("cublas_workspace", 2 * kCublasWorkspace);
  return b.build();
}

double allocator_headroom(const JobSpec& spec) {
  if (spec.hardware.expandable_segments) return 0.06;
  return spec.training.variable_length ? 0.32 : 0.15;
}

MemoryEstimate estimate_memory(const JobSpec& spec) {
  MemoryEstimate e;
  const StepState steady{spec.training.grad_accum > 1, true, true};
  e.phases = micro_step_phases(spec, steady);
  e.phases.push_back(optimizer_step_phase(spec));
  e.peak = *std::max_element(e.phases.begin(), e.phases.end(),
                             [](const PhasePeak& a, const PhasePeak& b) { return a.bytes < b.bytes; });
  e.parameters = spec.model.parameters();
  e.activations_per_layer_bytes =
      activation_model(spec).saved_per_layer * spec.training.micro_batch_size * spec.training.seq_len;
  e.peak_allocated_bytes = e.peak.bytes;
  e.headroom_fraction = allocator_headroom(spec);
  e.peak_reserved_bytes =
      static_cast<std::uint64_t>(std::ceil(static_cast<double>(e.peak_allocated_bytes) * (1 + e.headroom_fraction)));
  const GpuSpec& gpu = *find_gpu(spec.hardware.gpu);
  const MigProfile* slice = spec.hardware.mig.empty() ? nullptr : find_mig_profile(gpu, spec.hardware.mig);
  e.device_bytes = slice ? slice->memory_bytes : gpu.total_bytes;
  e.cuda_context_bytes = gpu.context_reserve_bytes;
  e.communication_bytes = spec.parallel.world_size > 1 ? kNcclBuffers : 0;
  const std::uint64_t outside = e.cuda_context_bytes + e.communication_bytes;
  e.usable_bytes = e.device_bytes > outside ? e.device_bytes - outside : 0;
  e.margin_bytes = static_cast<std::int64_t>(e.usable_bytes) - static_cast<std::int64_t>(e.peak_reserved_bytes);
  e.fits = e.margin_bytes >= 0;
  e.within_hbm_limit =
      e.fits && static_cast<double>(e.peak_reserved_bytes) <= kMaxHbmFraction * static_cast<double>(e.device_bytes);
  return e;
}

std::vector<std::uint64_t> simulate_micro_steps(const JobSpec& spec, std::span<const std::uint64_t> seq_lens) {
  std::vector<std::uint64_t> peaks;
  const std::uint64_t ga = spec.training.grad_accum;
  JobSpec step = spec;
  for (std::size_t k = 0; k < seq_lens.size(); ++k) {
    step.training.seq_len = seq_lens[k];
    const StepState state{k % ga != 0, k >= ga, k >= 1};
    std::uint64_t peak = 0;
    for (const auto& phase : micro_step_phases(step, state)) peak = std::max(peak, phase.bytes);
    if ((k + 1) % ga == 0) peak = std::max(peak, optimizer_step_phase(step).bytes);
    peaks.push_back(peak);
  }
  return peaks;
}

}  // namespace fragscope::plan

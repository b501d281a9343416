#include "plan/llama_program.h"

#include <algorithm>

#include "plan/llama_program_impl.h"
#include "util/gpu_catalog.h"

namespace fragscope::plan {

int streaming_multiprocessors(const JobSpec& spec) {
  struct Sms {
    std::string_view gpu;
    int count;
  };
  // The SXM parts' multiprocessor counts (deviceQuery); a MIG slice gets its sevenths.
  constexpr Sms kSms[] = {{"A100-40GB", 108}, {"A100-80GB", 108}, {"H100-80GB", 132}, {"H100-94GB", 132},
                          {"H200", 132},      {"B200", 148},      {"L40S", 142}};
  int count = 132;
  for (const auto& s : kSms)
    if (s.gpu == spec.hardware.gpu) count = s.count;
  if (!spec.hardware.mig.empty())
    if (const GpuSpec* gpu = find_gpu(spec.hardware.gpu))
      if (const MigProfile* p = find_mig_profile(*gpu, spec.hardware.mig)) count = count * p->compute_slices / 7;
  return std::max(count, 1);
}

using Tensor = AllocationTape::Tensor;
using Impl = LlamaProgram::Impl;

Impl::Impl(const JobSpec& s, AllocationTape& t) : spec(s), tape(t) {
  mode = compute_mode(spec);
  autocast = mode == ComputeMode::kAutocast;
  const Strategy strategy = spec.parallel.strategy;
  fsdp = strategy == Strategy::kFsdp;
  ddp = strategy == Strategy::kDdp;
  zero = strategy == Strategy::kZero1 || strategy == Strategy::kZero2 || strategy == Strategy::kZero3;
  ranks = spec.parallel.world_size;
  offload_optimizer = spec.training.cpu_offload != CpuOffload::kNone;
  offload_parameters = spec.training.cpu_offload == CpuOffload::kParameters;
  ce = mode == ComputeMode::kFp32 ? 4 : 2;
  re = mode == ComputeMode::kLowPrecision ? 2 : 4;
  const ModelShape& m = spec.model;
  h = m.hidden_size;
  kv = m.kv_dim();
  inter = m.intermediate_size;
  vocab = m.vocab_size;
  heads = m.num_attention_heads;
  kv_heads = m.num_kv_heads;
  head_dim = m.head_dim();
  layers = m.num_layers;
  batch = spec.training.micro_batch_size;
  sms = streaming_multiprocessors(spec);
}

std::uint64_t Impl::block_param_elements(std::uint32_t which) const {
  switch (which) {
    case kQ:
    case kO:
      return h * h;
    case kK:
    case kV:
      return h * kv;
    case kGate:
    case kUp:
    case kDown:
      return h * inter;
    default:
      return h;
  }
}

void Impl::construct() {
  auto add = [&](std::uint64_t elements, std::uint32_t group) {
    Param p;
    p.elements = elements;
    p.group = group;
    p.storage = alloc(elements * param_bytes(), MemoryRole::kParameters);
    params.push_back(p);
  };
  add(vocab * h, 0);  // embed_tokens
  for (std::uint64_t l = 0; l < layers; ++l)
    for (std::uint32_t w = 0; w < kBlockParams; ++w) add(block_param_elements(w), static_cast<std::uint32_t>(1 + l));
  add(h, 0);                                           // final norm
  if (!spec.model.tied_embeddings) add(vocab * h, 0);  // lm_head
  if (fsdp) shard_parameters();
  if (ddp) allocate_ddp_buckets();
  if (zero) allocate_zero_buffers();
}

std::vector<LlamaProgram::OptimizedTensor> Impl::optimized_tensors() const {
  std::vector<OptimizedTensor> out;
  if (offload_optimizer) return out;  // the step runs on the host
  if (zero) {                         // DeepSpeed: the fp32 master partition, one flat group
    std::uint64_t total = 0;
    for (const auto& p : params) total += p.elements;
    out.push_back({ceil_div(total, ranks), param_bytes()});
    return out;
  }
  for (const auto& p : params) out.push_back({fsdp ? shard_elements(p.elements) : p.elements, param_bytes()});
  return out;
}

void Impl::release_gradients() {
  if (fsdp) {  // parameter order; the root group's block goes with lm_head, the last
    for (std::uint32_t g = 1; g <= layers; ++g) drop(group_grads[g]), group_grads[g] = kNone;
    drop(group_grads[0]);
    group_grads[0] = kNone;
    return;
  }
  for (auto& p : params) drop(p.grad), p.grad = kNone;
}

void Impl::deliver(GradSlot& slot, Tensor grad, bool view) {
  if (slot.grad == kNone) {
    slot = {grad, view};
    return;
  }
  if (slot.view) {
    const Tensor sum = alloc(tape.bytes(slot.grad), MemoryRole::kTransients);
    drop(slot.grad);
    drop(grad);
    slot = {sum, false};
    return;
  }
  drop(grad);  // added in place
}

Tensor Impl::take(GradSlot& slot) {
  const Tensor g = slot.grad;
  slot = {};
  return g;
}

/// AccumulateGrad: the first gradient becomes .grad, later ones are added to it.
void Impl::accumulate(Param& p, Tensor grad) {
  if (fsdp) {
    if (p.pending_grad == kNone)
      p.pending_grad = grad;
    else
      drop(grad);  // tied embeddings: the second gradient is added
    return;
  }
  if (zero || p.grad != kNone) {
    drop(grad);  // added into .grad or DeepSpeed's flat buffer
    return;
  }
  p.grad = grad;
  tape.retag(grad, MemoryRole::kGradients);
}

/// autocast's cached low-precision cast of an fp32 parameter (kNone outside autocast).
Tensor Impl::weight_cast(const Param& p) {
  if (!autocast) return kNone;
  for (const auto& [param, cast] : autocast_cache)
    if (param == &p) return cast;
  const Tensor cast = alloc(p.elements * 2, MemoryRole::kWeightCopies);  // its reference is the cache's
  autocast_cache.emplace_back(&p, cast);
  return cast;
}

void Impl::release_autocast_cache() {
  for (const auto& entry : autocast_cache) drop(entry.second);
  autocast_cache.clear();
}

void Impl::train_micro_step(std::uint64_t seq_len, std::uint32_t index) {
  seq = seq_len;
  tokens = batch * seq;
  tape.mark(ProgramPhase::kForward, index);
  const Tensor ids = alloc(8 * tokens, MemoryRole::kBatch);  // input_ids, also the labels
  unshard(0);
  Norm final;
  forward_blocks(true, final);
  LossHead loss = loss_forward(final);
  drop(final.out);
  drop_model_output(loss.logits);
  release_autocast_cache();

  // backward: the loss head, the final norm, the blocks, the embedding
  tape.mark(ProgramPhase::kBackward, index);
  backward_thread = true;
  GradSlot out_slot;
  deliver(out_slot, loss_backward(loss, final));
  GradSlot residual;
  rms_norm_backward(final, take(out_slot), re, final_norm(), residual);
  for (std::uint64_t l = layers; l-- > 0;) {
    unshard(static_cast<std::uint32_t>(1 + l));
    block_backward(blocks[l], l, residual);
    if (fsdp) reduce_gradients(static_cast<std::uint32_t>(1 + l));
  }
  drop(rotary_cos);
  drop(rotary_sin);
  embedding_backward(take(residual));
  if (fsdp) {
    reduce_gradients(0);
    drop(reduce_input);
    reduce_input = kNone;
  }
  drop(ids);
  blocks.clear();
  backward_thread = false;
}

void Impl::drop_model_output(Tensor logits) {
  drop(logits);
  for (auto& b : blocks) drop(b.k_cache), drop(b.v_cache);
}

void Impl::eval_pass(std::uint64_t eval_batch, std::uint64_t eval_seq, std::uint32_t after) {
  const std::uint64_t training_batch = batch;
  tape.mark(ProgramPhase::kEval, after);
  batch = eval_batch;
  seq = eval_seq;
  tokens = batch * seq;
  const Tensor ids = alloc(8 * tokens, MemoryRole::kBatch);
  unshard(0);
  Norm final;
  forward_blocks(false, final);
  saving = false;
  Linear head = linear(final.out, h, vocab, lm_head(), re == 4);
  saving = true;
  drop(final.out);
  // logits = model(…).logits.float(): reading .logits drops the output object (and its KV
  // cache) before the cast; the logits themselves go once cast.
  tape.retag(head.output, MemoryRole::kLogitsAndLoss);
  hold(head.output);
  drop_model_output(head.output);
  Tensor logits32 = head.output;
  if (ce != 4) logits32 = alloc(4 * tokens * vocab, MemoryRole::kLogitsAndLoss), drop(head.output);
  const Tensor log_probs = alloc(4 * tokens * vocab, MemoryRole::kLogitsAndLoss);
  drop(logits32);
  drop(log_probs);
  drop(rotary_cos);
  drop(rotary_sin);
  release_autocast_cache();
  drop(ids);
  blocks.clear();
  batch = training_batch;
}

LlamaProgram::LlamaProgram(const JobSpec& spec, AllocationTape& tape) : impl_(std::make_unique<Impl>(spec, tape)) {}
LlamaProgram::~LlamaProgram() = default;
void LlamaProgram::construct() { impl_->construct(); }
void LlamaProgram::train_micro_step(std::uint64_t seq_len, std::uint32_t index) {
  impl_->train_micro_step(seq_len, index);
}
void LlamaProgram::eval_pass(std::uint64_t batch, std::uint64_t seq_len, std::uint32_t after) {
  impl_->eval_pass(batch, seq_len, after);
}
std::vector<LlamaProgram::OptimizedTensor> LlamaProgram::optimized_tensors() const {
  return impl_->optimized_tensors();
}
void LlamaProgram::release_gradients() { impl_->release_gradients(); }
std::uint64_t LlamaProgram::block_activation_bytes() const { return impl_->block_activation_bytes; }

}  // namespace fragscope::plan

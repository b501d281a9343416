#include "plan/activation_model.h"

namespace fragscope::plan {

ComputeMode compute_mode(const JobSpec& spec) {
  switch (spec.training.precision) {
    case Precision::kFp32: return ComputeMode::kFp32;
    case Precision::kBf16:
    case Precision::kMixedBf16: return ComputeMode::kLowPrecision;
    case Precision::kAmpBf16:
    case Precision::kAmpFp16: return ComputeMode::kAutocast;
  }
  return ComputeMode::kAutocast;
}

namespace {

struct Dims {
  std::uint64_t h, kv, i, heads, vocab, seq, head_dim;
};

/// Attention-core tensors one block keeps. Eager keeps the s×s scores: softmax's fp32 output
/// (4 B) and, outside fp32, its cast for the value matmul (2 B), per head and key position.
std::uint64_t attention_saved(const Dims& d, ComputeMode mode, Attention attention, bool selective) {
  const std::uint64_t e = mode == ComputeMode::kFp32 ? 4 : 2;  // element size of q/k/v/out
  if (attention == Attention::kEager) {
    // q, k and v after repeat_kv (all heads), and the transposed output copy o_proj reads.
    const std::uint64_t scores = selective ? 0 : (mode == ComputeMode::kFp32 ? 4 : 6) * d.heads * d.seq;
    return 4 * e * d.h + scores;
  }
  // SDPA / flash: q, k, v (kv heads only), output and the fp32 log-sum-exp per head.
  return e * d.h + 2 * e * d.kv + e * d.h + 4 * d.heads;
}

}  // namespace

ActivationModel activation_model(const JobSpec& spec) {
  const ModelShape& m = spec.model;
  const TrainingConfig& t = spec.training;
  const Dims d{m.hidden_size, m.kv_dim(), m.intermediate_size, m.num_attention_heads, m.vocab_size, t.seq_len,
               m.head_dim()};
  const ComputeMode mode = compute_mode(spec);
  const bool selective = t.checkpointing == Checkpointing::kSelective;
  const bool eager = t.attention == Attention::kEager;
  const std::uint64_t attention = attention_saved(d, mode, t.attention, selective);

  ActivationModel a;
  switch (mode) {
    case ComputeMode::kAutocast:
      // Block input and mid-block residual (fp32, kept by RMSNorm's pow/mul), both norms'
      // normalized fp32 values, the bf16 casts each of q/k/v/gate/up makes of its input, and the
      // MLP's gate, up, silu(gate) and product (bf16).
      a.mlp_saved_per_layer = 4 * d.h + 4 * d.h + 2 * 2 * d.h + 8 * d.i;
      a.saved_per_layer = 4 * d.h + 4 * d.h + 3 * 2 * d.h + attention + a.mlp_saved_per_layer;
      a.checkpoint_per_layer = 4 * d.h;
      // DynamicLayer.update concatenates onto an empty tensor of the keys' dtype, and rotary made
      // the keys fp32, so both cached k and v are fp32 copies SDPA does not keep.
      a.kv_cache_per_layer = 8 * d.kv;
      a.final_forward = 4 * d.h + 4 * d.h + 4 * d.h + 2 * d.h;  // input, normalized, output, cast
      a.final_backward = 4 * d.h + 4 * d.h + 2 * d.h;
      a.logits_forward = (2 + 4 + 4) * d.vocab;  // bf16 logits, .float(), log_softmax
      a.rope_bytes = 2 * t.seq_len * d.head_dim * 4;
      a.attention_mask_bytes = eager ? 4 * t.micro_batch_size * t.seq_len * t.seq_len : 0;
      a.weight_copy_bytes = 2 * (m.num_layers * m.layer_matmul_parameters() + m.vocab_size * m.hidden_size);
      a.weight_grad_transient = (2 + 4) * d.h * d.i;  // bf16 grad, then its fp32 cast
      break;
    case ComputeMode::kLowPrecision:
      // RMSNorm: its fp32 upcast (pow/mul keep it), the normalized value cast back, and the
      // output the projections share; the block input itself is not kept.
      a.mlp_saved_per_layer = (4 + 2 + 2) * d.h + 8 * d.i;
      a.saved_per_layer = (4 + 2 + 2) * d.h + attention + a.mlp_saved_per_layer;
      a.checkpoint_per_layer = 2 * d.h;
      a.kv_cache_per_layer = 0;  // SDPA keeps the cache tensors themselves
      a.final_forward = (4 + 2 + 2) * d.h;
      a.final_backward = a.final_forward;
      a.logits_forward = (2 + 4 + 4) * d.vocab;
      a.rope_bytes = 2 * t.seq_len * d.head_dim * 2;
      a.attention_mask_bytes = eager ? 2 * t.micro_batch_size * t.seq_len * t.seq_len : 0;
      a.weight_grad_transient = 2 * d.h * d.i;
      break;
    case ComputeMode::kFp32:
      // Each norm keeps its input, normalized value and output (shared by the projections).
      a.mlp_saved_per_layer = 12 * d.h + 16 * d.i;
      a.saved_per_layer = 12 * d.h + attention + a.mlp_saved_per_layer;
      a.checkpoint_per_layer = 4 * d.h;
      a.kv_cache_per_layer = 0;
      a.final_forward = 12 * d.h;
      a.final_backward = 12 * d.h;
      a.logits_forward = (4 + 4) * d.vocab;  // .float() is a no-op
      a.rope_bytes = 2 * t.seq_len * d.head_dim * 4;
      a.attention_mask_bytes = eager ? 4 * t.micro_batch_size * t.seq_len * t.seq_len : 0;
      a.weight_grad_transient = 4 * d.h * d.i;
      break;
  }
  if (!t.use_cache || t.checkpointing == Checkpointing::kFull) a.kv_cache_per_layer = 0;  // HF turns it off
  // Loss backward: log_softmax's saved output, the gradient nll_loss hands it, and the gradient it
  // returns (fp32 in every regime).
  a.logits_backward = 12 * d.vocab;
  // A block's backward: the fp32 residual gradient plus two intermediate-size gradients.
  a.block_backward_transient = 4 * d.h + 4 * d.i;
  if (eager) {
    // Softmax backward holds its saved output and three fp32 score-sized gradients at once
    // (16 B per score measured on the p7 trace) where 6 B were saved (4 in fp32).
    const std::uint64_t saved = mode == ComputeMode::kFp32 ? 4 : 6;
    a.attention_backward_transient = (16 - (selective ? 0 : saved)) * d.heads * d.seq;
    // A no-grad forward holds the fp32 pre-softmax sum and the softmax output together.
    a.scores_forward_transient = 8 * d.heads * d.seq;
  }
  return a;
}

}  // namespace fragscope::plan

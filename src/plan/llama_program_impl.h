#pragma once
/// @file llama_program_impl.h
/// @brief The emulated model behind LlamaProgram (llama_program.h): its state, the reference
/// counting every emulated op goes through, and the ops, one concept per source file:
/// - llama_program.cpp: the parameters, gradient delivery, autocast's cast cache, a micro-step,
///   an eval pass, the optimizer's view of the parameters;
/// - llama_data_parallel.cpp: FSDP2's shards, all-gathers and reduce-scatters, DDP's buckets,
///   DeepSpeed ZeRO's flat buffers;
/// - llama_layers.cpp: F.linear, LlamaRMSNorm, the rotary embedding and the embedding, forward
///   and backward, and the cuBLAS workspaces;
/// - llama_attention.cpp: the attention core (SDPA's flash kernel, HF's eager attention),
///   forward, backward and selective recomputation;
/// - llama_decoder.cpp: the decoder layers' forward and backward, full checkpointing's
///   recomputation;
/// - llama_loss.cpp: lm_head and the loss (standard, chunked, fused), forward and backward.
///
/// Invariants: `refs[t]` counts Python's and the saved-tensor slots' references to a live
/// tensor; a tensor is freed on the tape when its count reaches zero (drop()); `save()` takes a
/// reference only while autograd records (`saving`); `live_activations` is the sum of the live
/// tensors allocated as MemoryRole::kActivations.
/// Thread-safety: none (one Impl per LlamaProgram, driven from one thread).

#include <cstdint>
#include <utility>
#include <vector>

#include "plan/llama_program.h"

namespace fragscope::plan {

/// One block's parameters, in model.parameters() order.
enum LlamaBlockParam : std::uint32_t { kQ, kK, kV, kO, kGate, kUp, kDown, kInputNorm, kPostNorm, kBlockParams };

struct LlamaProgram::Impl {
  using OptimizedTensor = LlamaProgram::OptimizedTensor;
  static constexpr Tensor kNone = AllocationTape::kNone;

  // The autograd engine's InputBuffer of one tensor: the first gradient is kept; later ones are
  // added in place, or out of place when the first one is a view (an mm's reshaped grad_input).
  struct GradSlot {
    Tensor grad = kNone;
    bool view = false;
  };
  struct Linear {           // what one projection keeps for its backward
    Tensor weight = kNone;  // autocast's cast (kNone when the parameter itself is multiplied)
    Tensor input = kNone;   // the saved input: autocast's cast, or the shared input
    bool input_cast = false;
    Tensor output = kNone;
  };
  struct Norm {          // LlamaRMSNorm's saved tensors
    Tensor x32 = kNone;  // the fp32 input (the input itself when it is fp32)
    Tensor rstd = kNone;
    Tensor normed = kNone;  // what weight * (…) keeps
    Tensor out = kNone;
  };
  struct Core {                              // the attention core's saved tensors
    Tensor q = kNone, k = kNone, v = kNone;  // as the kernel saw them (casts under autocast)
    Tensor out = kNone, lse = kNone;
    Tensor probs = kNone, probs_cast = kNone;  // eager: softmax output and its cast
    bool q_cast = false, k_cast = false, v_cast = false;
    bool k_repeated = false, v_repeated = false;  // eager GQA: repeat_kv copies
  };
  struct Block {
    Tensor input = kNone;  // the residual stream entering the block
    Norm norm1, norm2;
    Linear q, k, v, o, gate, up, down;
    Tensor q_rot = kNone, k_rot = kNone;
    Tensor k_cache = kNone, v_cache = kNone;
    Tensor key = kNone, value = kNone;  // what the attention core received
    std::uint64_t key_bytes = 0, value_bytes = 0;
    Core core;
    Tensor mid = kNone;  // residual stream after attention
    Tensor act = kNone, product = kNone;
    bool checkpointed = false;
  };
  struct Param {
    std::uint64_t elements = 0;
    Tensor storage = kNone;       // the parameter, or this rank's shard
    Tensor unsharded = kNone;     // FSDP: the gathered parameter while unsharded
    Tensor grad = kNone;          // .grad
    Tensor pending_grad = kNone;  // FSDP: the unsharded gradient waiting for post-backward
    std::uint32_t group = 0;      // FSDP: 0 = root (embedding, final norm, lm_head), 1 + block
  };
  struct Rotary {
    Tensor cos = kNone, sin = kNone;
  };
  struct LossHead {
    Linear head;
    Tensor logits = kNone;  // the model output's logits (standard loss), dropped with the output
    Tensor shifted = kNone, log_probs = kNone;
    Tensor grad_input = kNone, grad_weight = kNone;               // fused: computed during the forward
    std::vector<std::pair<std::uint64_t, std::uint64_t>> chunks;  // chunked: (first token, tokens)
  };

  const JobSpec& spec;
  AllocationTape& tape;
  ComputeMode mode;
  bool autocast, fsdp, ddp, zero;
  bool offload_optimizer, offload_parameters;  // state (and shards) in host memory
  std::uint64_t ce;                            // element size of matmul inputs and outputs
  std::uint64_t re;                            // element size of the residual stream (and of the embedding output)
  std::uint64_t ranks;
  std::uint64_t h, kv, inter, vocab, heads, kv_heads, head_dim, layers, batch;
  int sms;

  std::vector<std::uint32_t> refs;  // Python + saved-tensor references per tensor
  std::vector<bool> activation;     // allocated as MemoryRole::kActivations
  std::uint64_t live_activations = 0;
  std::uint64_t block_activation_bytes = 0;  // what one block keeps for its backward (the largest seen)
  bool saving = true;                        // false inside a checkpointed block's forward and in eval
  std::vector<std::pair<const void*, Tensor>> autocast_cache;  // parameter → its cached cast
  std::vector<Param> params;
  std::vector<Tensor> group_grads;   // FSDP: one reduce-scatter output per group holds the grads
  Tensor reduce_input = kNone;       // FSDP: the last group's reduce-scatter input
  std::vector<Tensor> flat_buffers;  // DDP buckets, ZeRO's flat copies
  Tensor cublas_forward = kNone, cublas_backward = kNone;
  bool backward_thread = false;  // the autograd engine's thread runs the backward and its recomputations
  Tensor rotary_cos = kNone, rotary_sin = kNone;  // kept by the rotary muls for the backward
  std::vector<Block> blocks;
  std::uint64_t tokens = 0, seq = 0;

  Impl(const JobSpec& s, AllocationTape& t);

  // --- tensors and references ---------------------------------------------------------------
  Tensor alloc(std::uint64_t bytes, MemoryRole role, alloc::StreamId stream = 0) {
    const Tensor t = tape.alloc(bytes, role, stream);
    if (refs.size() <= t) refs.resize(t + 1, 0);
    refs[t] = 1;
    if (role == MemoryRole::kActivations) live_activations += bytes;
    if (activation.size() <= t) activation.resize(t + 1, false);
    activation[t] = role == MemoryRole::kActivations;
    return t;
  }
  void hold(Tensor t) {
    if (t != kNone) ++refs[t];
  }
  void drop(Tensor t) {
    if (t == kNone || --refs[t] != 0) return;
    if (activation[t]) live_activations -= tape.bytes(t);
    tape.free(t);
  }
  void save(Tensor t) {
    if (saving) hold(t);
  }
  void transient(std::uint64_t bytes) { drop(alloc(bytes, MemoryRole::kTransients)); }
  static std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

  // --- parameters (llama_program.cpp) ---------------------------------------------------------
  std::uint64_t block_param_elements(std::uint32_t which) const;
  Param& block_param(std::uint64_t layer, std::uint32_t which) { return params[1 + layer * kBlockParams + which]; }
  Param& final_norm() { return params[1 + layers * kBlockParams]; }
  Param& lm_head() { return spec.model.tied_embeddings ? params[0] : params[2 + layers * kBlockParams]; }
  /// Element size of the parameters as built and as the optimizer holds them (fp32 master
  /// weights except under pure bf16).
  std::uint64_t param_bytes() const { return spec.training.precision == Precision::kBf16 ? 2 : 4; }
  void construct();
  std::vector<OptimizedTensor> optimized_tensors() const;
  void release_gradients();

  // --- gradients and autocast's casts (llama_program.cpp) -------------------------------------
  void deliver(GradSlot& slot, Tensor grad, bool view = false);
  static Tensor take(GradSlot& slot);
  void accumulate(Param& p, Tensor grad);
  Tensor weight_cast(const Param& p);
  void release_autocast_cache();

  // --- one micro-step, one eval pass (llama_program.cpp) --------------------------------------
  void train_micro_step(std::uint64_t seq_len, std::uint32_t index);
  void eval_pass(std::uint64_t eval_batch, std::uint64_t eval_seq, std::uint32_t after);
  void drop_model_output(Tensor logits);

  // --- data parallelism (llama_data_parallel.cpp) ---------------------------------------------
  std::uint64_t shard_elements(std::uint64_t elements) const { return ceil_div(elements, ranks); }
  void shard_parameters();
  void allocate_ddp_buckets();
  void allocate_zero_buffers();
  void unshard(std::uint32_t group);
  void reshard(std::uint32_t group);
  void reduce_gradients(std::uint32_t group);

  // --- layers (llama_layers.cpp) --------------------------------------------------------------
  Linear linear(Tensor x, std::uint64_t in, std::uint64_t out, const Param& p, bool input_fp32);
  Tensor linear_backward(Linear& l, Tensor grad_out, std::uint64_t in, std::uint64_t out, Param& p, bool copy_grad,
                         bool free_grad);
  void gemm_workspace();
  Norm rms_norm(Tensor x, std::uint64_t x_bytes);
  void rms_norm_backward(Norm& n, Tensor grad, std::uint64_t x_bytes, Param& weight, GradSlot& slot);
  void column_reduction_buffer();
  Rotary rotary_tables();
  Tensor rotary(std::uint64_t dim);
  Tensor rotary_backward(Tensor grad, std::uint64_t dim);
  void embedding_backward(Tensor grad);

  // --- attention core (llama_attention.cpp) ---------------------------------------------------
  Core attention_core(const Block& b);
  Tensor autocast_input(Tensor t, std::uint64_t bytes, std::uint64_t dim, bool& cast);
  Core sdpa(const Block& b, std::uint64_t q_bytes);
  Core eager(const Block& b, std::uint64_t q_bytes);
  void forget_core(Block& b);
  void recompute_core(Block& b);
  std::uint64_t flash_backward_workspace() const;
  Tensor uncast(Tensor g, bool cast, std::uint64_t dim);
  Tensor unrepeat(Tensor g, bool repeated);
  void sdpa_backward(Core& a, Tensor grad_out, GradSlot& q_slot, GradSlot& k_slot, GradSlot& v_slot);
  void eager_backward(Core& a, Tensor grad_out, GradSlot& q_slot, GradSlot& k_slot, GradSlot& v_slot);

  // --- decoder layers (llama_decoder.cpp) -----------------------------------------------------
  bool checkpointed(std::uint64_t layer) const;
  void forward_blocks(bool training, Norm& final);
  Tensor block_forward(Block& b, std::uint64_t layer, Tensor x, bool build_cache, bool early_stop = false);
  void block_backward(Block& b, std::uint64_t layer, GradSlot& residual);
  void recompute(Block& b, std::uint64_t layer);

  // --- the loss head (llama_loss.cpp) ---------------------------------------------------------
  LossHead loss_forward(Norm& final);
  Tensor chunk_loss(std::uint64_t n, Tensor* weight_grad);
  Tensor loss_backward(LossHead& loss, Norm& final);
};

}  // namespace fragscope::plan

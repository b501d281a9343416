// The attention core: SDPA's flash kernel and HF's eager attention, their backward, and
// selective recomputation (the core alone recomputed before its backward).
#include "plan/llama_program_impl.h"

#include <algorithm>

namespace fragscope::plan {

using Tensor = AllocationTape::Tensor;
using Impl = LlamaProgram::Impl;

namespace {

std::uint64_t round_up(std::uint64_t a, std::uint64_t b) { return Impl::ceil_div(a, b) * b; }

}  // namespace

Impl::Core Impl::attention_core(const Block& b) {
  const std::uint64_t q_bytes = autocast ? 4 : ce;
  return spec.training.attention == Attention::kEager ? eager(b, q_bytes) : sdpa(b, q_bytes);
}

/// An input of an autocast op: cast to bf16 when fp32, else the tensor itself.
Tensor Impl::autocast_input(Tensor t, std::uint64_t bytes, std::uint64_t dim, bool& cast) {
  if (autocast && bytes == 4) {
    cast = true;
    return alloc(2 * tokens * dim, MemoryRole::kActivations);
  }
  hold(t);
  return t;
}

/// SDPA's flash kernel: the inputs (k, v, q order of the casts), output and log-sum-exp.
Impl::Core Impl::sdpa(const Block& b, std::uint64_t q_bytes) {
  Core a;
  a.k = autocast_input(b.key, b.key_bytes, kv, a.k_cast);
  a.v = autocast_input(b.value, b.value_bytes, kv, a.v_cast);
  a.q = autocast_input(b.q_rot, q_bytes, h, a.q_cast);
  for (Tensor t : {a.q, a.k, a.v}) save(t);
  a.out = alloc(ce * tokens * h, MemoryRole::kActivations);
  a.lse = alloc(4 * tokens * heads, MemoryRole::kActivations);
  save(a.out);
  save(a.lse);
  drop(a.lse);
  drop(a.q);
  drop(a.v);
  drop(a.k);
  return a;
}

/// HF eager_attention_forward: repeat_kv, q @ kᵀ × scaling + mask, softmax in fp32, cast,
/// @ v, transpose(1, 2).contiguous(). Derived from the modeling code (p7, p9 measure it).
Impl::Core Impl::eager(const Block& b, std::uint64_t q_bytes) {
  Core a;
  const std::uint64_t scores = batch * heads * seq * seq;
  const bool grouped = kv_heads != heads;
  auto repeated = [&](Tensor t, std::uint64_t bytes, bool& flag) {
    if (!grouped) return hold(t), t;
    flag = true;
    return alloc(bytes * tokens * h, MemoryRole::kActivations);
  };
  const Tensor kr = repeated(b.key, b.key_bytes, a.k_repeated);
  const Tensor vr = repeated(b.value, b.value_bytes, a.v_repeated);
  a.q = autocast_input(b.q_rot, q_bytes, h, a.q_cast);
  a.k = autocast_input(kr, b.key_bytes, h, a.k_cast);
  save(a.q);
  save(a.k);
  const Tensor raw = alloc(ce * scores, MemoryRole::kTransients);
  drop(a.q);
  drop(a.k);
  const Tensor scaled = alloc(ce * scores, MemoryRole::kTransients);
  drop(raw);
  const Tensor masked = alloc(std::max(ce, re) * scores, MemoryRole::kTransients);  // + the mask (model dtype)
  drop(scaled);
  a.probs = alloc(4 * scores, MemoryRole::kActivations);
  save(a.probs);
  drop(masked);
  if (ce != 4) {
    a.probs_cast = alloc(ce * scores, MemoryRole::kActivations);
    save(a.probs_cast);
    drop(a.probs);
  } else {
    a.probs_cast = a.probs;  // no cast in fp32: probs @ v keeps the softmax output itself
    save(a.probs_cast);
  }
  a.v = autocast_input(vr, b.value_bytes, h, a.v_cast);
  save(a.v);
  const Tensor heads_first = alloc(ce * tokens * h, MemoryRole::kTransients);
  drop(a.v);
  a.out = alloc(ce * tokens * h, MemoryRole::kActivations);  // transpose(1, 2).contiguous()
  drop(heads_first);
  drop(a.probs_cast);  // returned as attn_weights, dropped by the decoder layer
  drop(kr);
  drop(vr);
  return a;
}

/// Selective recompute (Korthikanti et al.) keeps the attention core's inputs instead of what
/// the core saved; the core runs again just before its backward.
void Impl::forget_core(Block& b) {
  for (Tensor t : {b.q_rot, b.key, b.value}) hold(t);
  Core& a = b.core;
  for (Tensor t : {a.q, a.k, a.v, a.lse, a.probs_cast, a.probs}) drop(t);
  if (spec.training.attention != Attention::kEager) drop(a.out);  // SDPA keeps its output
}

void Impl::recompute_core(Block& b) {
  b.core = attention_core(b);
  drop(b.core.out);  // the recomputed output matters only as the core's saved tensor
  for (Tensor t : {b.q_rot, b.key, b.value}) drop(t);
}

std::uint64_t Impl::flash_backward_workspace() const {
  // dq accumulator (fp32), GQA's expanded dk and dv, softmax_d per (row + 1), 256-aligned.
  const std::uint64_t rows = tokens * heads;
  std::uint64_t bytes = 4 * rows * head_dim;
  if (kv_heads != heads) bytes += 2 * 2 * rows * head_dim;
  return bytes + round_up(4 * batch * heads * (seq + 1), 256);
}

/// The autocast casts' backward: an fp32 gradient for an fp32 input.
Tensor Impl::uncast(Tensor g, bool cast, std::uint64_t dim) {
  if (!cast) return g;
  const Tensor g32 = alloc(4 * tokens * dim, MemoryRole::kTransients);
  drop(g);
  return g32;
}

/// repeat_kv's backward: the repeated heads' gradients summed back.
Tensor Impl::unrepeat(Tensor g, bool repeated) {
  if (!repeated) return g;
  const Tensor summed = alloc(tape.bytes(g) / h * kv, MemoryRole::kTransients);
  drop(g);
  return summed;
}

void Impl::sdpa_backward(Core& a, Tensor grad_out, GradSlot& q_slot, GradSlot& k_slot, GradSlot& v_slot) {
  const Tensor gq = alloc(ce * tokens * h, MemoryRole::kTransients);
  const Tensor gk = alloc(ce * tokens * kv, MemoryRole::kTransients);
  const Tensor gv = alloc(ce * tokens * kv, MemoryRole::kTransients);
  transient(flash_backward_workspace());
  drop(grad_out);
  drop(a.k);
  drop(a.q);
  drop(a.v);
  drop(a.lse);
  drop(a.out);
  deliver(q_slot, uncast(gq, a.q_cast, h));
  deliver(k_slot, uncast(gk, a.k_cast, kv));
  deliver(v_slot, uncast(gv, a.v_cast, kv));
}

void Impl::eager_backward(Core& a, Tensor grad_out, GradSlot& q_slot, GradSlot& k_slot, GradSlot& v_slot) {
  const std::uint64_t scores = batch * heads * seq * seq;
  // probs @ v
  const Tensor g_probs = alloc(ce * scores, MemoryRole::kTransients);
  const Tensor g_v = alloc(ce * tokens * h, MemoryRole::kTransients);
  drop(grad_out);
  drop(a.probs_cast);
  drop(a.v);
  deliver(v_slot, unrepeat(uncast(g_v, a.v_cast, h), a.v_repeated));
  Tensor g_sm = g_probs;
  if (ce != 4) g_sm = alloc(4 * scores, MemoryRole::kTransients), drop(g_probs);  // .to(query.dtype)
  // softmax's backward holds its output, the incoming gradient, one fp32 temporary and the
  // result: 16 bytes per score (measured on p7's trace).
  const Tensor temp = alloc(4 * scores, MemoryRole::kTransients);
  const Tensor g_masked = alloc(4 * scores, MemoryRole::kTransients);
  drop(temp);
  drop(g_sm);
  drop(a.probs);
  const Tensor g_scaled = alloc(ce * scores, MemoryRole::kTransients);
  drop(g_masked);
  const Tensor g_raw = alloc(ce * scores, MemoryRole::kTransients);
  drop(g_scaled);
  const Tensor g_q = alloc(ce * tokens * h, MemoryRole::kTransients);
  const Tensor g_k = alloc(ce * tokens * h, MemoryRole::kTransients);
  drop(g_raw);
  drop(a.q);
  drop(a.k);
  const Tensor gk = unrepeat(uncast(g_k, a.k_cast, h), a.k_repeated);
  deliver(q_slot, uncast(g_q, a.q_cast, h));
  deliver(k_slot, gk);
}

}  // namespace fragscope::plan

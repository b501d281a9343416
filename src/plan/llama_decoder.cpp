// The decoder stack: the embedding output through every LlamaDecoderLayer to the final norm,
// each layer's backward, and full (non-reentrant) checkpointing's recomputation.
#include "plan/llama_program_impl.h"

#include <algorithm>

namespace fragscope::plan {

using Tensor = AllocationTape::Tensor;
using Impl = LlamaProgram::Impl;

bool Impl::checkpointed(std::uint64_t layer) const {
  if (spec.training.checkpointing != Checkpointing::kFull) return false;
  return layer < spec.training.checkpointed_layers.value_or(layers);
}

/// The forward up to the final norm; the rotary tables stay for the backward.
void Impl::forward_blocks(bool training, Norm& final) {
  const Tensor embedded = alloc(re * tokens * h, MemoryRole::kActivations);
  const Tensor positions = alloc(8 * seq, MemoryRole::kBatch);  // cache_position, position_ids
  transient(8 * seq);
  Tensor mask = kNone;  // eager: create_causal_mask's 4-D mask in the model's dtype
  if (spec.training.attention == Attention::kEager) mask = alloc(re * batch * seq * seq, MemoryRole::kActivations);
  const Rotary rot = rotary_tables();
  blocks.assign(layers, Block{});
  // HF turns the cache off when training with gradient checkpointing
  const bool cache = spec.training.use_cache && (!training || spec.training.checkpointing != Checkpointing::kFull);
  Tensor x = embedded;
  hold(embedded);  // inputs_embeds stays referenced until the model's forward returns
  for (std::uint64_t l = 0; l < layers; ++l) {
    Block& b = blocks[l];
    b.checkpointed = training && checkpointed(l);
    unshard(static_cast<std::uint32_t>(1 + l));
    saving = training && !b.checkpointed;
    if (b.checkpointed) hold(x);  // the checkpoint keeps its input
    const std::uint64_t before = live_activations;
    const Tensor next = block_forward(b, l, x, cache);
    // a middle block: the first keeps inputs_embeds referenced, which frees nothing
    if (training && l == std::min<std::uint64_t>(1, layers - 1))
      block_activation_bytes = std::max(block_activation_bytes, live_activations - before);
    saving = true;
    reshard(static_cast<std::uint32_t>(1 + l));
    drop(x);  // the loop rebinds hidden_states
    x = next;
  }
  saving = training;
  final = rms_norm(x, re);
  saving = true;
  drop(x);
  drop(positions);
  drop(embedded);
  drop(mask);
  rotary_cos = rot.cos, rotary_sin = rot.sin;
}

/// LlamaDecoderLayer.forward; `x` is the residual stream (the caller keeps its reference).
/// `early_stop`: a non-reentrant checkpoint's recomputation, which stops at the block's last
/// saved tensor (down_proj's inputs), before down_proj's output exists.
Tensor Impl::block_forward(Block& b, std::uint64_t layer, Tensor x, bool build_cache, bool early_stop) {
  b.input = x;
  b.norm1 = rms_norm(x, re);
  const bool norm_fp32 = re == 4;
  b.q = linear(b.norm1.out, h, h, block_param(layer, kQ), norm_fp32);
  b.k = linear(b.norm1.out, h, kv, block_param(layer, kK), norm_fp32);
  b.v = linear(b.norm1.out, h, kv, block_param(layer, kV), norm_fp32);
  b.q_rot = rotary(h);
  b.k_rot = rotary(kv);
  drop(b.q.output);
  drop(b.k.output);
  const std::uint64_t rot_bytes = autocast ? 4 : ce;
  b.key = b.k_rot, b.value = b.v.output;
  b.key_bytes = rot_bytes, b.value_bytes = ce;
  if (build_cache) {
    // DynamicLayer.update concatenates onto empty tensors of the keys' dtype; the cache holds
    // them until the model output is dropped.
    b.k_cache = alloc(rot_bytes * tokens * kv, MemoryRole::kKvCache);
    b.v_cache = alloc(rot_bytes * tokens * kv, MemoryRole::kKvCache);
    drop(b.k_rot);
    drop(b.v.output);
    b.key = b.k_cache, b.value = b.v_cache, b.value_bytes = rot_bytes;
  }
  b.core = attention_core(b);
  if (spec.training.checkpointing == Checkpointing::kSelective && saving) forget_core(b);
  b.o = linear(b.core.out, h, h, block_param(layer, kO), false);
  drop(b.core.out);
  drop(b.q_rot);
  if (!build_cache) {
    drop(b.k_rot);
    drop(b.v.output);
  }
  drop(b.norm1.out);
  b.mid = alloc(re * tokens * h, MemoryRole::kActivations);
  drop(b.o.output);
  b.norm2 = rms_norm(b.mid, re);
  b.gate = linear(b.norm2.out, h, inter, block_param(layer, kGate), norm_fp32);
  save(b.gate.output);  // SiLU keeps its input
  b.act = alloc(ce * tokens * inter, MemoryRole::kActivations);
  drop(b.gate.output);
  b.up = linear(b.norm2.out, h, inter, block_param(layer, kUp), norm_fp32);
  save(b.act);  // act * up keeps both
  save(b.up.output);
  b.product = alloc(ce * tokens * inter, MemoryRole::kActivations);
  drop(b.act);
  drop(b.up.output);
  if (early_stop) {
    b.down = Linear{};
    b.down.weight = weight_cast(block_param(layer, kDown));
    save(b.down.weight);
    b.down.input = b.product;
    save(b.product);
    drop(b.product);
    drop(b.norm2.out);
    drop(b.mid);
    return kNone;
  }
  b.down = linear(b.product, inter, h, block_param(layer, kDown), false);
  drop(b.product);
  drop(b.norm2.out);
  const Tensor out = alloc(re * tokens * h, MemoryRole::kActivations);
  drop(b.down.output);
  drop(b.mid);
  return out;
}

void Impl::block_backward(Block& b, std::uint64_t layer, GradSlot& residual) {
  // out = mid + down: the down branch gets the gradient cast to its dtype (a checkpointed
  // block's recomputation starts when down_proj's backward unpacks its inputs).
  Tensor g_down = residual.grad;
  const bool cast_down = ce != re;
  if (cast_down) g_down = alloc(ce * tokens * h, MemoryRole::kTransients);
  if (b.checkpointed) recompute(b, layer);
  const Tensor g_product = linear_backward(b.down, g_down, inter, h, block_param(layer, kDown), false, cast_down);
  // act * up
  const Tensor g_up = alloc(ce * tokens * inter, MemoryRole::kTransients);
  const Tensor g_act = alloc(ce * tokens * inter, MemoryRole::kTransients);
  drop(g_product);
  drop(b.act);
  drop(b.up.output);
  GradSlot n2;
  deliver(n2, linear_backward(b.up, g_up, h, inter, block_param(layer, kUp), false, true), !autocast);
  const Tensor g_gate = alloc(ce * tokens * inter, MemoryRole::kTransients);  // SiLU
  drop(g_act);
  drop(b.gate.output);
  deliver(n2, linear_backward(b.gate, g_gate, h, inter, block_param(layer, kGate), false, true), !autocast);
  GradSlot mid = residual;  // the residual passes the output's gradient through
  residual = {};
  rms_norm_backward(b.norm2, take(n2), re, block_param(layer, kPostNorm), mid);
  // mid = x + o
  Tensor g_o = mid.grad;
  const bool cast_o = ce != re;
  if (cast_o) g_o = alloc(ce * tokens * h, MemoryRole::kTransients);
  const Tensor g_core = linear_backward(b.o, g_o, h, h, block_param(layer, kO), false, cast_o);
  if (spec.training.checkpointing == Checkpointing::kSelective) recompute_core(b);
  GradSlot q_slot, k_slot, v_slot;
  if (spec.training.attention == Attention::kEager)
    eager_backward(b.core, g_core, q_slot, k_slot, v_slot);
  else
    sdpa_backward(b.core, g_core, q_slot, k_slot, v_slot);
  Tensor g_v = take(v_slot);
  if (b.value_bytes != ce) {  // the fp32 value cache hands its slice back to the bf16 projection
    const Tensor cast = alloc(ce * tokens * kv, MemoryRole::kTransients);
    drop(g_v);
    g_v = cast;
  }
  const Tensor g_k = rotary_backward(take(k_slot), kv);
  const Tensor g_q = rotary_backward(take(q_slot), h);
  GradSlot n1;
  const bool views = !autocast;
  deliver(n1, linear_backward(b.v, g_v, h, kv, block_param(layer, kV), true, true), views);
  deliver(n1, linear_backward(b.k, g_k, h, kv, block_param(layer, kK), true, true), views);
  deliver(n1, linear_backward(b.q, g_q, h, h, block_param(layer, kQ), true, true), views);
  rms_norm_backward(b.norm1, take(n1), re, block_param(layer, kInputNorm), mid);
  residual = mid;
  if (b.checkpointed) drop(b.input);  // the checkpoint's reference to its input
}

void Impl::recompute(Block& b, std::uint64_t layer) {
  saving = true;
  block_forward(b, layer, b.input, false, /*early_stop=*/true);
  release_autocast_cache();  // the recomputation ran in its own autocast region
}

}  // namespace fragscope::plan

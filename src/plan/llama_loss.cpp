// lm_head and the loss: HF's ForCausalLMLoss (standard), lm_head + cross-entropy checkpointed per
// chunk of tokens (chunked), Liger's fused linear cross-entropy (fused); forward and backward.
#include "plan/llama_program_impl.h"

#include <algorithm>

namespace fragscope::plan {

using Tensor = AllocationTape::Tensor;
using Impl = LlamaProgram::Impl;

Impl::LossHead Impl::loss_forward(Norm& final) {
  LossHead loss;
  const Tensor padded = alloc(8 * batch * (seq + 1), MemoryRole::kBatch);  // labels padded with -100
  loss.shifted = alloc(8 * tokens, MemoryRole::kBatch);                    // shifted; kept by nll_loss
  switch (spec.training.loss) {
    case Loss::kStandard: {
      // lm_head, then ForCausalLMLoss: logits.float(), log_softmax, nll_loss
      loss.head = linear(final.out, h, vocab, lm_head(), re == 4);
      loss.logits = loss.head.output;
      tape.retag(loss.logits, MemoryRole::kLogitsAndLoss);
      Tensor logits32 = loss.logits;
      if (ce != 4)
        logits32 = alloc(4 * tokens * vocab, MemoryRole::kLogitsAndLoss);
      else
        hold(loss.logits);
      loss.log_probs = alloc(4 * tokens * vocab, MemoryRole::kLogitsAndLoss);  // kept by log_softmax
      drop(logits32);
      break;
    }
    case Loss::kChunked: {
      // torch.split(hidden, chunk) then per chunk checkpoint(lm_head + cross_entropy): only
      // the chunk's logits exist at a time; the checkpoints keep the hidden states.
      hold(final.out);
      for (std::uint64_t first = 0; first < tokens; first += spec.training.loss_chunk_tokens)
        loss.chunks.emplace_back(first, std::min(spec.training.loss_chunk_tokens, tokens - first));
      const bool was = saving;
      saving = false;
      for (const auto& [first, n] : loss.chunks) chunk_loss(n, nullptr);
      saving = was;
      break;
    }
    case Loss::kFused: {
      // LigerFusedLinearCrossEntropy: per chunk of 2^⌈log2(T / ⌈V/h⌉)⌉ tokens, logits in fp32,
      // the loss's gradient in place, grad_input and grad_weight accumulated during the forward.
      loss.grad_input = alloc(re * tokens * h, MemoryRole::kLogitsAndLoss);
      loss.grad_weight = alloc(vocab * h * (autocast ? 4 : ce), MemoryRole::kLogitsAndLoss);
      const std::uint64_t per = ceil_div(tokens, ceil_div(vocab, h));
      std::uint64_t chunk = 1;
      while (chunk < per) chunk *= 2;
      weight_cast(lm_head());
      for (std::uint64_t first = 0; first < tokens; first += chunk) {
        const std::uint64_t n = std::min(chunk, tokens - first);
        const Tensor x = autocast && re == 4 ? alloc(2 * n * h, MemoryRole::kTransients) : kNone;
        const Tensor logits = alloc(ce * n * vocab, MemoryRole::kLogitsAndLoss);
        const Tensor logits32 = ce != 4 ? alloc(4 * n * vocab, MemoryRole::kLogitsAndLoss) : kNone;
        drop(logits);
        const Tensor grad_chunk = alloc(re * n * h, MemoryRole::kTransients);
        drop(grad_chunk);
        drop(logits32);
        drop(x);
      }
      break;
    }
  }
  drop(padded);
  return loss;
}

/// One chunk of a chunked loss: lm_head, .float(), log_softmax. `weight_grad` (its
/// recomputation in the backward, non-null) keeps what autograd saves, runs the chunk's
/// backward and returns its hidden-state gradient: lm_head's weight gradient goes to
/// `*weight_grad`, the autograd engine's input buffer of the node every chunk's weight
/// gradient flows into (the weight, or autocast's cast of it cached in the forward), where
/// the first one stays and later ones are added in place.
Tensor Impl::chunk_loss(std::uint64_t n, Tensor* weight_grad) {
  const bool keep = weight_grad != nullptr;
  const std::uint64_t full = tokens;
  tokens = n;
  Linear head = linear(kNone, h, vocab, lm_head(), re == 4);
  if (!autocast || re != 4) head.input = kNone;  // the slice of the hidden states is a view
  Tensor logits32 = head.output;
  if (ce != 4)
    logits32 = alloc(4 * n * vocab, MemoryRole::kLogitsAndLoss);
  else
    hold(head.output);
  drop(head.output);
  const Tensor log_probs = alloc(4 * n * vocab, MemoryRole::kLogitsAndLoss);
  save(log_probs);
  drop(logits32);
  drop(log_probs);
  Tensor grad = kNone;
  if (keep) {
    release_autocast_cache();  // the recomputation's autocast region ends: its casts live as saved tensors
    const Tensor g_nll = alloc(4 * n * vocab, MemoryRole::kLogitsAndLoss);
    const Tensor g_lsm = alloc(4 * n * vocab, MemoryRole::kLogitsAndLoss);
    drop(g_nll);
    drop(log_probs);
    Tensor g_logits = g_lsm;
    if (ce != 4) g_logits = alloc(ce * n * vocab, MemoryRole::kLogitsAndLoss), drop(g_lsm);
    // MmBackward: the weight's gradient, then the input's
    const Tensor g_weight = alloc(ce * h * vocab, MemoryRole::kTransients);
    gemm_workspace();
    grad = alloc(ce * n * h, MemoryRole::kTransients);
    drop(g_logits);
    drop(head.weight);
    drop(head.input);
    if (*weight_grad == kNone)
      *weight_grad = g_weight;
    else
      drop(g_weight);
    if (head.input_cast) {
      const Tensor g32 = alloc(4 * n * h, MemoryRole::kTransients);
      drop(grad);
      grad = g32;
    }
  }
  tokens = full;
  return grad;
}

/// The gradient of the final norm's output.
Tensor Impl::loss_backward(LossHead& loss, Norm& final) {
  switch (spec.training.loss) {
    case Loss::kStandard: {
      const Tensor g_nll = alloc(4 * tokens * vocab, MemoryRole::kLogitsAndLoss);
      drop(loss.shifted);
      const Tensor g_lsm = alloc(4 * tokens * vocab, MemoryRole::kLogitsAndLoss);
      drop(g_nll);
      drop(loss.log_probs);
      Tensor g_logits = g_lsm;
      if (ce != 4) g_logits = alloc(ce * tokens * vocab, MemoryRole::kLogitsAndLoss), drop(g_lsm);
      return linear_backward(loss.head, g_logits, h, vocab, lm_head(), false, true);
    }
    case Loss::kChunked: {
      // each chunk recomputed and differentiated, last first; lm_head's weight gradient
      // reaches .grad once every chunk has added to it (through the cast's backward under
      // autocast); split's backward concatenates the hidden-state gradients
      std::vector<Tensor> pieces;
      Tensor weight_grad = kNone;
      for (auto it = loss.chunks.rbegin(); it != loss.chunks.rend(); ++it)
        pieces.push_back(chunk_loss(it->second, &weight_grad));
      if (autocast) {
        const Tensor grad32 = alloc(4 * h * vocab, MemoryRole::kTransients);
        drop(weight_grad);
        weight_grad = grad32;
      }
      accumulate(lm_head(), weight_grad);
      drop(loss.shifted);
      const Tensor grad =
          alloc(tape.bytes(pieces.front()) / loss.chunks.back().second * tokens, MemoryRole::kTransients);
      for (Tensor p : pieces) drop(p);
      drop(final.out);  // the checkpoints' hidden states
      return grad;
    }
    case Loss::kFused: {
      drop(loss.shifted);
      accumulate(lm_head(), loss.grad_weight);
      return loss.grad_input;
    }
  }
  return kNone;
}

}  // namespace fragscope::plan

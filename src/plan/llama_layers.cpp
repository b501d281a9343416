// The layers around the attention core, forward and backward: F.linear (and its cuBLAS
// workspace), LlamaRMSNorm, the rotary embedding, and the embedding's backward.
#include "plan/llama_program_impl.h"

#include <algorithm>

#include "util/bytes.h"

namespace fragscope::plan {

using Tensor = AllocationTape::Tensor;
using Impl = LlamaProgram::Impl;

namespace {

// PyTorch sizes each cuBLAS handle's workspace at 32 MiB on Hopper and newer; the forward runs on
// the Python thread's handle, the backward on the autograd thread's. Both live for the process.
constexpr std::uint64_t kCublasWorkspace = 32 * kMiB;
// embedding_dense_backward sorts the indices above this many and sums per segment first.
constexpr std::uint64_t kEmbeddingSortThreshold = 3072;
constexpr std::uint64_t kEmbeddingRowsPerThread = 10;  // NROWS_PER_THREAD, EmbeddingBackwardKernel.cu

}  // namespace

/// F.linear(x, W): autocast casts the weight (cached) and an fp32 input (per call).
Impl::Linear Impl::linear(Tensor x, std::uint64_t in, std::uint64_t out, const Param& p, bool input_fp32) {
  Linear l;
  l.weight = weight_cast(p);
  save(l.weight);
  if (autocast && input_fp32) {
    l.input = alloc(2 * tokens * in, MemoryRole::kActivations);
    l.input_cast = true;
  } else {
    l.input = x;
    hold(x);
  }
  save(l.input);
  l.output = alloc(ce * tokens * out, MemoryRole::kActivations);
  gemm_workspace();
  drop(l.input);  // a cast is a temporary of the call; a shared input keeps its own reference
  return l;
}

/// Backward of F.linear (grad_weight, grad_input), then autocast's casts' backward: the
/// input cast's (created after the weight's) first, then the weight cast's.
Tensor Impl::linear_backward(Linear& l, Tensor grad_out, std::uint64_t in, std::uint64_t out, Param& p, bool copy_grad,
                             bool free_grad) {
  if (copy_grad) {  // the gradient arrives through a transposed view and is made contiguous
    const Tensor c = alloc(ce * tokens * out, MemoryRole::kTransients);
    drop(grad_out);
    grad_out = c;
    free_grad = true;
  }
  const Tensor grad_weight = alloc(ce * in * out, MemoryRole::kTransients);
  gemm_workspace();
  const Tensor grad_input = alloc(ce * tokens * in, MemoryRole::kTransients);
  if (free_grad) drop(grad_out);
  drop(l.weight);
  drop(l.input);
  Tensor result = grad_input;
  if (l.input_cast) {
    result = alloc(4 * tokens * in, MemoryRole::kTransients);
    drop(grad_input);
  }
  if (autocast) {
    const Tensor grad32 = alloc(4 * in * out, MemoryRole::kTransients);
    drop(grad_weight);
    accumulate(p, grad32);
  } else {
    accumulate(p, grad_weight);
  }
  return result;
}

/// The cuBLAS handle of the thread running a GEMM gets its workspace at its first GEMM, after
/// the GEMM's output: the forward's (rotary_tables) or the autograd thread's, whose first GEMM
/// is a backward's or a recomputation's (a checkpointed loss chunk's lm_head).
void Impl::gemm_workspace() {
  if (backward_thread && cublas_backward == kNone) cublas_backward = alloc(kCublasWorkspace, MemoryRole::kWorkspaces);
}

/// LlamaRMSNorm: x.to(fp32); variance = x.pow(2).mean(-1); x * rsqrt(variance + eps);
/// weight * x.to(input_dtype).
Impl::Norm Impl::rms_norm(Tensor x, std::uint64_t x_bytes) {
  Norm n;
  const bool upcast = x_bytes != 4;
  if (upcast)
    n.x32 = alloc(4 * tokens * h, MemoryRole::kActivations);
  else
    n.x32 = x, hold(x);
  save(n.x32);                                           // pow keeps its input
  drop(alloc(4 * tokens * h, MemoryRole::kTransients));  // pow(2), consumed by mean
  const Tensor variance = alloc(4 * tokens, MemoryRole::kTransients);
  const Tensor shifted = alloc(4 * tokens, MemoryRole::kTransients);  // variance + eps
  n.rstd = alloc(4 * tokens, MemoryRole::kActivations);
  save(n.rstd);  // rsqrt keeps its result
  drop(shifted);
  save(n.x32);  // x * rstd keeps both
  save(n.rstd);
  const Tensor normed32 = alloc(4 * tokens * h, MemoryRole::kActivations);
  drop(n.rstd);
  if (upcast) {
    drop(n.x32);
    n.normed = alloc(x_bytes * tokens * h, MemoryRole::kActivations);  // .to(input_dtype)
    save(n.normed);                                                    // weight * (…) keeps it
    n.out = alloc(x_bytes * tokens * h, MemoryRole::kActivations);
    drop(n.normed);
    drop(normed32);
  } else {
    n.normed = normed32;
    save(n.normed);
    n.out = alloc(4 * tokens * h, MemoryRole::kActivations);
    drop(normed32);
    drop(n.x32);
  }
  drop(variance);
  return n;
}

/// Backward of LlamaRMSNorm from its output's gradient; the input's gradient goes to `slot`.
void Impl::rms_norm_backward(Norm& n, Tensor grad, std::uint64_t x_bytes, Param& weight, GradSlot& slot) {
  const bool upcast = x_bytes != 4;
  // weight * normed: grad * weight, and grad * normed summed over tokens for the weight
  const Tensor grad_normed = alloc(x_bytes * tokens * h, MemoryRole::kTransients);
  const Tensor product = alloc(x_bytes * tokens * h, MemoryRole::kTransients);
  const Tensor grad_weight = alloc((upcast ? 2 : 4) * h, MemoryRole::kTransients);
  column_reduction_buffer();
  drop(product);
  drop(grad);
  drop(n.normed);
  accumulate(weight, grad_weight);
  Tensor grad_hs = grad_normed;
  if (upcast) {  // .to(input_dtype)
    grad_hs = alloc(4 * tokens * h, MemoryRole::kTransients);
    drop(grad_normed);
  }
  // x * rstd
  const Tensor product2 = alloc(4 * tokens * h, MemoryRole::kTransients);
  const Tensor grad_x = alloc(4 * tokens * h, MemoryRole::kTransients);
  const Tensor grad_rstd = alloc(4 * tokens, MemoryRole::kTransients);
  drop(product2);
  drop(grad_hs);
  drop(n.x32);
  drop(n.rstd);
  GradSlot x32_slot;
  GradSlot& target = upcast ? x32_slot : slot;
  deliver(target, grad_x);
  // rsqrt and + eps: per-token temporaries; mean: the expanded gradient
  const Tensor t1 = alloc(4 * tokens, MemoryRole::kTransients);
  const Tensor t2 = alloc(4 * tokens, MemoryRole::kTransients);
  const Tensor grad_var = alloc(4 * tokens, MemoryRole::kTransients);
  drop(t2);
  drop(t1);
  drop(grad_rstd);
  drop(n.rstd);
  const Tensor grad_sq = alloc(4 * tokens * h, MemoryRole::kTransients);
  drop(grad_var);
  // pow(2): grad * 2 * x
  const Tensor p1 = alloc(4 * tokens * h, MemoryRole::kTransients);
  const Tensor p2 = alloc(4 * tokens * h, MemoryRole::kTransients);
  const Tensor grad_pow = alloc(4 * tokens * h, MemoryRole::kTransients);
  drop(p2);
  drop(p1);
  drop(grad_sq);
  drop(n.x32);
  deliver(target, grad_pow);
  if (!upcast) return;
  const Tensor grad_in = alloc(x_bytes * tokens * h, MemoryRole::kTransients);  // x.to(fp32)
  drop(take(x32_slot));
  deliver(slot, grad_in);
}

/// A sum over tokens of a [tokens, h] tensor (a norm weight's gradient): PyTorch's
/// ReduceConfig (block 32 × 4 threads, 4 outputs per thread) spreads a long column over up to
/// 16 blocks per SM, which sum through a global buffer.
void Impl::column_reduction_buffer() {
  const std::uint64_t values_per_thread = ceil_div(tokens, 4);
  if (values_per_thread < 256) return;
  const std::uint64_t by_grid = ceil_div(static_cast<std::uint64_t>(sms) * 16, ceil_div(h, 128));
  const std::uint64_t by_work = ceil_div(values_per_thread, 16);
  const std::uint64_t ctas = std::max(std::min(by_grid, by_work), ceil_div(values_per_thread, 256));
  if (ctas > 1) transient(4 * h * ctas * 128);
}

/// LlamaRotaryEmbedding: inv_freq @ positions (fp32), cat, cos/sin × attention_scaling, cast
/// to the hidden states' dtype.
Impl::Rotary Impl::rotary_tables() {
  const Tensor positions = alloc(4 * seq, MemoryRole::kBatch);
  const Tensor freqs = alloc(2 * seq * head_dim, MemoryRole::kBatch);
  if (cublas_forward == kNone) cublas_forward = alloc(kCublasWorkspace, MemoryRole::kWorkspaces);
  const Tensor emb = alloc(4 * seq * head_dim, MemoryRole::kBatch);
  Rotary r;
  const Tensor cos0 = alloc(4 * seq * head_dim, MemoryRole::kBatch);
  r.cos = alloc(4 * seq * head_dim, MemoryRole::kBatch);
  drop(cos0);
  const Tensor sin0 = alloc(4 * seq * head_dim, MemoryRole::kBatch);
  r.sin = alloc(4 * seq * head_dim, MemoryRole::kBatch);
  drop(sin0);
  Rotary cast = r;
  if (re != 4) {
    cast.cos = alloc(re * seq * head_dim, MemoryRole::kBatch);
    cast.sin = alloc(re * seq * head_dim, MemoryRole::kBatch);
  }
  drop(positions);
  drop(freqs);
  drop(emb);
  if (re != 4) {
    drop(r.cos);
    drop(r.sin);
  }
  return cast;
}

/// apply_rotary_pos_emb for one of q/k: (x * cos) + (rotate_half(x) * sin), fp32 under
/// autocast (cos/sin are fp32). x * cos keeps cos only: the projection output is not saved.
Tensor Impl::rotary(std::uint64_t dim) {
  const std::uint64_t out_bytes = autocast ? 4 : ce;
  const Tensor x_cos = alloc(out_bytes * tokens * dim, MemoryRole::kTransients);
  const Tensor neg = alloc(ce * tokens * dim / 2, MemoryRole::kTransients);
  const Tensor rotated = alloc(ce * tokens * dim, MemoryRole::kTransients);
  drop(neg);
  const Tensor rot_sin = alloc(out_bytes * tokens * dim, MemoryRole::kTransients);
  drop(rotated);
  const Tensor sum = alloc(out_bytes * tokens * dim, MemoryRole::kActivations);
  drop(x_cos);
  drop(rot_sin);
  return sum;
}

/// Backward of apply_rotary_pos_emb for one of q/k: the rotary output's gradient becomes the
/// projection output's.
Tensor Impl::rotary_backward(Tensor grad, std::uint64_t dim) {
  GradSlot in;
  auto to_compute = [&](Tensor g) {  // autocast promoted the rotary to fp32
    if (!autocast) return g;
    const Tensor c = alloc(ce * tokens * dim, MemoryRole::kTransients);
    drop(g);
    return c;
  };
  const std::uint64_t promoted = autocast ? 4 : ce;
  const Tensor g_rot = to_compute(alloc(promoted * tokens * dim, MemoryRole::kTransients));  // * sin
  // cat(-x2, x1): neg, then the two slices' zero-filled gradients
  const Tensor g_neg = alloc(ce * tokens * dim / 2, MemoryRole::kTransients);
  deliver(in, alloc(ce * tokens * dim, MemoryRole::kTransients));
  drop(g_neg);
  const Tensor g_x1 = alloc(ce * tokens * dim, MemoryRole::kTransients);
  drop(g_rot);
  deliver(in, g_x1);
  const Tensor g_cos = to_compute(alloc(promoted * tokens * dim, MemoryRole::kTransients));  // x * cos
  drop(grad);
  deliver(in, g_cos);
  return take(in);
}

void Impl::embedding_backward(Tensor grad) {
  Param& e = params[0];
  const std::uint64_t grad_bytes = re;  // the embedding weight's dtype
  if (tokens <= kEmbeddingSortThreshold) {
    const Tensor g = alloc(grad_bytes * vocab * h, MemoryRole::kTransients);
    drop(grad);
    accumulate(e, g);
    return;
  }
  // radix-sort the indices, then fp32 partial sums per segment of up to 10 rows
  const Tensor sorted = alloc(8 * tokens, MemoryRole::kTransients);
  const Tensor original = alloc(8 * tokens, MemoryRole::kTransients);
  const Tensor keys = alloc(8 * tokens, MemoryRole::kTransients);
  transient(19 * tokens);  // cub's radix-sort storage
  drop(keys);
  const Tensor g = alloc(grad_bytes * vocab * h, MemoryRole::kTransients);
  const Tensor offsets = alloc(8 * tokens, MemoryRole::kTransients);
  const Tensor counts = alloc(8 * tokens, MemoryRole::kTransients);
  const Tensor ends = alloc(8 * tokens, MemoryRole::kTransients);
  const std::uint64_t partial_segments = tokens / kEmbeddingRowsPerThread + std::min(tokens, vocab);
  const Tensor partial_offsets = alloc(8 * partial_segments, MemoryRole::kTransients);
  transient(4 * h * partial_segments);
  drop(partial_offsets);
  drop(ends);
  drop(counts);
  drop(offsets);
  drop(original);
  drop(sorted);
  drop(grad);
  accumulate(e, g);
}

}  // namespace fragscope::plan

// FSDP2 (fully_shard per block, then the root), DDP's reducer buckets and DeepSpeed ZeRO's flat
// buffers, as the traces of the fixtures show them: what each allocates, on which stream, when.
#include "plan/llama_program_impl.h"

#include <array>

#include "util/bytes.h"

namespace fragscope::plan {

using Tensor = AllocationTape::Tensor;
using Impl = LlamaProgram::Impl;

namespace {

// FSDP2's reduce-scatter runs on its own stream (its own pools), the all-gather on another.
constexpr alloc::StreamId kReduceScatterStream = 1;
constexpr alloc::StreamId kAllGatherStream = 2;

}  // namespace

void Impl::shard_parameters() {
  // fully_shard(block) for each block, then the root: each parameter of the group gets its
  // fp32 shard, then the group's constructed parameters are freed.
  group_grads.assign(layers + 1, kNone);
  auto shard_group = [&](std::uint32_t group) {
    std::vector<Tensor> originals;
    for (auto& p : params) {
      if (p.group != group) continue;
      originals.push_back(p.storage);
      p.storage =
          offload_parameters ? kNone : alloc(shard_elements(p.elements) * param_bytes(), MemoryRole::kParameters);
    }
    for (Tensor t : originals) drop(t);
  };
  for (std::uint32_t g = 1; g <= layers; ++g) shard_group(g);
  shard_group(0);
}

void Impl::allocate_ddp_buckets() {
  // The reducer's flat buckets (gradient_as_bucket_view=False), parameters in reverse order:
  // the first bucket closes at 1 MiB, the others at bucket_cap_mb = 25 MiB.
  std::uint64_t cap = 1 * kMiB, filled = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    filled += it->elements * param_bytes();
    if (filled >= cap) {
      flat_buffers.push_back(alloc(filled, MemoryRole::kCommunication));
      filled = 0;
      cap = 25 * kMiB;
    }
  }
  if (filled) flat_buffers.push_back(alloc(filled, MemoryRole::kCommunication));
}

void Impl::allocate_zero_buffers() {
  // DeepSpeed flattens the low-precision parameters (stage 3: this rank's partition) and keeps
  // a flat gradient buffer (stage 1: the whole low-precision gradient; stages 2-3: this rank's
  // fp32 partition); the fp32 master partition is the optimizer's (optimized_tensor_bytes()).
  std::uint64_t total = 0;
  for (auto& p : params) total += p.elements, drop(p.storage), p.storage = kNone;
  const Strategy s = spec.parallel.strategy;
  flat_buffers.push_back(alloc(ce * (s == Strategy::kZero3 ? ceil_div(total, ranks) : total), MemoryRole::kParameters));
  constexpr std::uint64_t kReduceBucketElements = 500'000'000;  // DeepSpeed's reduce_bucket_size
  const std::uint64_t gradients = offload_optimizer       ? ce * std::min(total, kReduceBucketElements)
                                  : s == Strategy::kZero1 ? ce * total
                                                          : 4 * ceil_div(total, ranks);
  flat_buffers.push_back(alloc(gradients, MemoryRole::kGradients));
}

void Impl::unshard(std::uint32_t group) {
  if (!fsdp) return;
  const std::uint64_t gathered = mode == ComputeMode::kLowPrecision ? 2 : 4;
  if (ranks == 1) {
    // One rank: each shard is cast to param_dtype and copied into its unsharded parameter,
    // the casts one ahead of the copies (the fixtures' traces).
    Tensor previous_cast = kNone;
    for (auto& p : params) {
      if (p.group != group) continue;
      const Tensor cast = gathered == 4 ? kNone : alloc(p.elements * 2, MemoryRole::kTransients);
      drop(previous_cast);
      p.unsharded = alloc(p.elements * gathered, MemoryRole::kWeightCopies);
      previous_cast = cast;
    }
    drop(previous_cast);
    return;
  }
  // More ranks: the all-gather's input (this rank's shards, cast) and output on the
  // all-gather stream, then copied out into the unsharded parameters.
  std::uint64_t elements = 0;
  for (auto& p : params)
    if (p.group == group) elements += shard_elements(p.elements);
  const Tensor input = alloc(elements * gathered, MemoryRole::kCommunication, kAllGatherStream);
  const Tensor output = alloc(elements * ranks * gathered, MemoryRole::kCommunication, kAllGatherStream);
  drop(input);
  for (auto& p : params)
    if (p.group == group) p.unsharded = alloc(p.elements * gathered, MemoryRole::kWeightCopies);
  drop(output);
}

void Impl::reshard(std::uint32_t group) {
  if (!fsdp) return;
  for (auto& p : params)
    if (p.group == group) drop(p.unsharded), p.unsharded = kNone;
}

/// post-backward: reshard; the group's gradients are cast and concatenated into the
/// reduce-scatter input (fp32), reduce-scattered into a new sharded gradient on the
/// reduce-scatter stream, which becomes the group's .grad or is added to it.
void Impl::reduce_gradients(std::uint32_t group) {
  reshard(group);
  std::uint64_t elements = 0;
  for (auto& p : params)
    if (p.group == group) elements += p.elements;
  drop(reduce_input);
  reduce_input = alloc(elements * 4, MemoryRole::kCommunication);
  // the unsharded gradients go in the order they were produced: norms, then the matrices
  // from down_proj back to q_proj
  static constexpr std::array<std::uint32_t, kBlockParams> kOrder = {kPostNorm, kInputNorm, kDown, kUp, kGate,
                                                                     kO,        kV,         kK,    kQ};
  if (group == 0) {
    for (auto& p : params)
      if (p.group == 0) drop(p.pending_grad), p.pending_grad = kNone;
  } else {
    for (std::uint32_t w : kOrder) {
      Param& p = block_param(group - 1, w);
      drop(p.pending_grad), p.pending_grad = kNone;
    }
  }
  const Tensor output = alloc(ceil_div(elements, ranks) * 4, MemoryRole::kGradients, kReduceScatterStream);
  if (group_grads[group] == kNone && !offload_parameters)
    group_grads[group] = output;
  else
    drop(output);  // added to .grad, or copied to the host's gradient shard
}

}  // namespace fragscope::plan

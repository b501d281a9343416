#include "plan/llama_program.h"

#include <algorithm>
#include <array>

#include "util/bytes.h"
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

namespace {

using Tensor = AllocationTape::Tensor;
constexpr Tensor kNone = AllocationTape::kNone;

// PyTorch sizes each cuBLAS handle's workspace at 32 MiB on Hopper and newer; the forward runs on
// the Python thread's handle, the backward on the autograd thread's. Both live for the process.
constexpr std::uint64_t kCublasWorkspace = 32 * kMiB;
// embedding_dense_backward sorts the indices above this many and sums per segment first.
constexpr std::uint64_t kEmbeddingSortThreshold = 3072;
constexpr std::uint64_t kEmbeddingRowsPerThread = 10;  // NROWS_PER_THREAD, EmbeddingBackwardKernel.cu
// FSDP2's reduce-scatter runs on its own stream (its own pools), the all-gather on another.
constexpr alloc::StreamId kReduceScatterStream = 1;
constexpr alloc::StreamId kAllGatherStream = 2;

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }
std::uint64_t round_up(std::uint64_t a, std::uint64_t b) { return ceil_div(a, b) * b; }

// One block's parameters, in model.parameters() order.
enum BlockParam : std::uint32_t { kQ, kK, kV, kO, kGate, kUp, kDown, kInputNorm, kPostNorm, kBlockParams };

}  // namespace

struct LlamaProgram::Impl {
  using OptimizedTensor = LlamaProgram::OptimizedTensor;
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
  std::uint32_t micro_step = 0;
  std::uint64_t tokens = 0, seq = 0;

  Impl(const JobSpec& s, AllocationTape& t) : spec(s), tape(t) {
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

  std::uint64_t block_param_elements(std::uint32_t which) const {
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
  Param& block_param(std::uint64_t layer, std::uint32_t which) { return params[1 + layer * kBlockParams + which]; }
  Param& final_norm() { return params[1 + layers * kBlockParams]; }
  Param& lm_head() { return spec.model.tied_embeddings ? params[0] : params[2 + layers * kBlockParams]; }
  /// Element size of the parameters as built and as the optimizer holds them (fp32 master
  /// weights except under pure bf16).
  std::uint64_t param_bytes() const { return spec.training.precision == Precision::kBf16 ? 2 : 4; }

  // --- model construction ---------------------------------------------------------------------
  void construct() {
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

  std::uint64_t shard_elements(std::uint64_t elements) const { return ceil_div(elements, ranks); }

  void shard_parameters() {
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

  void allocate_ddp_buckets() {
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

  void allocate_zero_buffers() {
    // DeepSpeed flattens the low-precision parameters (stage 3: this rank's partition) and keeps
    // a flat gradient buffer (stage 1: the whole low-precision gradient; stages 2-3: this rank's
    // fp32 partition); the fp32 master partition is the optimizer's (optimized_tensor_bytes()).
    std::uint64_t total = 0;
    for (auto& p : params) total += p.elements, drop(p.storage), p.storage = kNone;
    const Strategy s = spec.parallel.strategy;
    flat_buffers.push_back(
        alloc(ce * (s == Strategy::kZero3 ? ceil_div(total, ranks) : total), MemoryRole::kParameters));
    constexpr std::uint64_t kReduceBucketElements = 500'000'000;  // DeepSpeed's reduce_bucket_size
    const std::uint64_t gradients = offload_optimizer       ? ce * std::min(total, kReduceBucketElements)
                                    : s == Strategy::kZero1 ? ce * total
                                                            : 4 * ceil_div(total, ranks);
    flat_buffers.push_back(alloc(gradients, MemoryRole::kGradients));
  }

  // --- FSDP2: unshard, reshard, reduce --------------------------------------------------------
  void unshard(std::uint32_t group) {
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
  void reshard(std::uint32_t group) {
    if (!fsdp) return;
    for (auto& p : params)
      if (p.group == group) drop(p.unsharded), p.unsharded = kNone;
  }
  /// post-backward: reshard; the group's gradients are cast and concatenated into the
  /// reduce-scatter input (fp32), reduce-scattered into a new sharded gradient on the
  /// reduce-scatter stream, which becomes the group's .grad or is added to it.
  void reduce_gradients(std::uint32_t group) {
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

  // --- gradients ------------------------------------------------------------------------------
  void deliver(GradSlot& slot, Tensor grad, bool view = false) {
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
  static Tensor take(GradSlot& slot) {
    const Tensor g = slot.grad;
    slot = {};
    return g;
  }
  /// AccumulateGrad: the first gradient becomes .grad, later ones are added to it.
  void accumulate(Param& p, Tensor grad) {
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
  Tensor weight_cast(const Param& p) {
    if (!autocast) return kNone;
    for (const auto& [param, cast] : autocast_cache)
      if (param == &p) return cast;
    const Tensor cast = alloc(p.elements * 2, MemoryRole::kWeightCopies);  // its reference is the cache's
    autocast_cache.emplace_back(&p, cast);
    return cast;
  }
  void release_autocast_cache() {
    for (const auto& entry : autocast_cache) drop(entry.second);
    autocast_cache.clear();
  }

  // --- forward building blocks ----------------------------------------------------------------
  /// F.linear(x, W): autocast casts the weight (cached) and an fp32 input (per call).
  Linear linear(Tensor x, std::uint64_t in, std::uint64_t out, const Param& p, bool input_fp32) {
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
  /// The cuBLAS handle of the thread running a GEMM gets its workspace at its first GEMM, after
  /// the GEMM's output: the forward's (rotary_tables) or the autograd thread's, whose first GEMM
  /// is a backward's or a recomputation's (a checkpointed loss chunk's lm_head).
  void gemm_workspace() {
    if (backward_thread && cublas_backward == kNone) cublas_backward = alloc(kCublasWorkspace, MemoryRole::kWorkspaces);
  }

  /// LlamaRMSNorm: x.to(fp32); variance = x.pow(2).mean(-1); x * rsqrt(variance + eps);
  /// weight * x.to(input_dtype).
  Norm rms_norm(Tensor x, std::uint64_t x_bytes) {
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

  /// apply_rotary_pos_emb for one of q/k: (x * cos) + (rotate_half(x) * sin), fp32 under
  /// autocast (cos/sin are fp32). x * cos keeps cos only: the projection output is not saved.
  Tensor rotary(std::uint64_t dim) {
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

  /// An input of an autocast op: cast to bf16 when fp32, else the tensor itself.
  Tensor autocast_input(Tensor t, std::uint64_t bytes, std::uint64_t dim, bool& cast) {
    if (autocast && bytes == 4) {
      cast = true;
      return alloc(2 * tokens * dim, MemoryRole::kActivations);
    }
    hold(t);
    return t;
  }

  /// SDPA's flash kernel: the inputs (k, v, q order of the casts), output and log-sum-exp.
  Core sdpa(const Block& b, std::uint64_t q_bytes) {
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
  Core eager(const Block& b, std::uint64_t q_bytes) {
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

  Core attention_core(const Block& b) {
    const std::uint64_t q_bytes = autocast ? 4 : ce;
    return spec.training.attention == Attention::kEager ? eager(b, q_bytes) : sdpa(b, q_bytes);
  }

  /// LlamaDecoderLayer.forward; `x` is the residual stream (the caller keeps its reference).
  /// `early_stop`: a non-reentrant checkpoint's recomputation, which stops at the block's last
  /// saved tensor (down_proj's inputs), before down_proj's output exists.
  Tensor block_forward(Block& b, std::uint64_t layer, Tensor x, bool build_cache, bool early_stop = false) {
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
  /// Selective recompute (Korthikanti et al.) keeps the attention core's inputs instead of what
  /// the core saved; the core runs again just before its backward.
  void forget_core(Block& b) {
    for (Tensor t : {b.q_rot, b.key, b.value}) hold(t);
    Core& a = b.core;
    for (Tensor t : {a.q, a.k, a.v, a.lse, a.probs_cast, a.probs}) drop(t);
    if (spec.training.attention != Attention::kEager) drop(a.out);  // SDPA keeps its output
  }
  void recompute_core(Block& b) {
    b.core = attention_core(b);
    drop(b.core.out);  // the recomputed output matters only as the core's saved tensor
    for (Tensor t : {b.q_rot, b.key, b.value}) drop(t);
  }

  // --- backward building blocks ---------------------------------------------------------------
  /// Backward of F.linear (grad_weight, grad_input), then autocast's casts' backward: the
  /// input cast's (created after the weight's) first, then the weight cast's.
  Tensor linear_backward(Linear& l, Tensor grad_out, std::uint64_t in, std::uint64_t out, Param& p, bool copy_grad,
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

  /// A sum over tokens of a [tokens, h] tensor (a norm weight's gradient): PyTorch's
  /// ReduceConfig (block 32 × 4 threads, 4 outputs per thread) spreads a long column over up to
  /// 16 blocks per SM, which sum through a global buffer.
  void column_reduction_buffer() {
    const std::uint64_t values_per_thread = ceil_div(tokens, 4);
    if (values_per_thread < 256) return;
    const std::uint64_t by_grid = ceil_div(static_cast<std::uint64_t>(sms) * 16, ceil_div(h, 128));
    const std::uint64_t by_work = ceil_div(values_per_thread, 16);
    const std::uint64_t ctas = std::max(std::min(by_grid, by_work), ceil_div(values_per_thread, 256));
    if (ctas > 1) transient(4 * h * ctas * 128);
  }

  /// Backward of LlamaRMSNorm from its output's gradient; the input's gradient goes to `slot`.
  void rms_norm_backward(Norm& n, Tensor grad, std::uint64_t x_bytes, Param& weight, GradSlot& slot) {
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

  std::uint64_t flash_backward_workspace() const {
    // dq accumulator (fp32), GQA's expanded dk and dv, softmax_d per (row + 1), 256-aligned.
    const std::uint64_t rows = tokens * heads;
    std::uint64_t bytes = 4 * rows * head_dim;
    if (kv_heads != heads) bytes += 2 * 2 * rows * head_dim;
    return bytes + round_up(4 * batch * heads * (seq + 1), 256);
  }

  /// The autocast casts' backward: an fp32 gradient for an fp32 input.
  Tensor uncast(Tensor g, bool cast, std::uint64_t dim) {
    if (!cast) return g;
    const Tensor g32 = alloc(4 * tokens * dim, MemoryRole::kTransients);
    drop(g);
    return g32;
  }
  /// repeat_kv's backward: the repeated heads' gradients summed back.
  Tensor unrepeat(Tensor g, bool repeated) {
    if (!repeated) return g;
    const Tensor summed = alloc(tape.bytes(g) / h * kv, MemoryRole::kTransients);
    drop(g);
    return summed;
  }

  void sdpa_backward(Core& a, Tensor grad_out, GradSlot& q_slot, GradSlot& k_slot, GradSlot& v_slot) {
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

  void eager_backward(Core& a, Tensor grad_out, GradSlot& q_slot, GradSlot& k_slot, GradSlot& v_slot) {
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

  /// Backward of apply_rotary_pos_emb for one of q/k: the rotary output's gradient becomes the
  /// projection output's.
  Tensor rotary_backward(Tensor grad, std::uint64_t dim) {
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

  void block_backward(Block& b, std::uint64_t layer, GradSlot& residual) {
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

  void recompute(Block& b, std::uint64_t layer) {
    saving = true;
    block_forward(b, layer, b.input, false, /*early_stop=*/true);
    release_autocast_cache();  // the recomputation ran in its own autocast region
  }

  // --- one micro-step -----------------------------------------------------------------------
  struct Rotary {
    Tensor cos = kNone, sin = kNone;
  };
  /// LlamaRotaryEmbedding: inv_freq @ positions (fp32), cat, cos/sin × attention_scaling, cast
  /// to the hidden states' dtype.
  Rotary rotary_tables() {
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

  bool checkpointed(std::uint64_t layer) const {
    if (spec.training.checkpointing != Checkpointing::kFull) return false;
    return layer < spec.training.checkpointed_layers.value_or(layers);
  }

  /// The forward up to the final norm; the rotary tables stay for the backward.
  void forward_blocks(bool training, Norm& final) {
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

  // --- the loss head ------------------------------------------------------------------------
  struct LossHead {
    Linear head;
    Tensor logits = kNone;  // the model output's logits (standard loss), dropped with the output
    Tensor shifted = kNone, log_probs = kNone;
    Tensor grad_input = kNone, grad_weight = kNone;               // fused: computed during the forward
    std::vector<std::pair<std::uint64_t, std::uint64_t>> chunks;  // chunked: (first token, tokens)
  };

  LossHead loss_forward(Norm& final) {
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
  Tensor chunk_loss(std::uint64_t n, Tensor* weight_grad) {
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
  Tensor loss_backward(LossHead& loss, Norm& final) {
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

  void drop_model_output(Tensor logits) {
    drop(logits);
    for (auto& b : blocks) drop(b.k_cache), drop(b.v_cache);
  }

  void train_micro_step(std::uint64_t seq_len, std::uint32_t index) {
    micro_step = index;
    seq = seq_len;
    tokens = batch * seq;
    tape.mark(Phase::kForward, micro_step);
    const Tensor ids = alloc(8 * tokens, MemoryRole::kBatch);  // input_ids, also the labels
    unshard(0);
    Norm final;
    forward_blocks(true, final);
    LossHead loss = loss_forward(final);
    drop(final.out);
    drop_model_output(loss.logits);
    release_autocast_cache();

    // backward: the loss head, the final norm, the blocks, the embedding
    tape.mark(Phase::kBackward, micro_step);
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

  void embedding_backward(Tensor grad) {
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

  void eval_pass(std::uint64_t eval_batch, std::uint64_t eval_seq) {
    const std::uint64_t training_batch = batch;
    tape.mark(Phase::kEval, micro_step);
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

  std::vector<OptimizedTensor> optimized_tensors() const {
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

  void release_gradients() {
    if (fsdp) {  // parameter order; the root group's block goes with lm_head, the last
      for (std::uint32_t g = 1; g <= layers; ++g) drop(group_grads[g]), group_grads[g] = kNone;
      drop(group_grads[0]);
      group_grads[0] = kNone;
      return;
    }
    for (auto& p : params) drop(p.grad), p.grad = kNone;
  }
};

LlamaProgram::LlamaProgram(const JobSpec& spec, AllocationTape& tape) : impl_(std::make_unique<Impl>(spec, tape)) {}
LlamaProgram::~LlamaProgram() = default;
void LlamaProgram::construct() { impl_->construct(); }
void LlamaProgram::train_micro_step(std::uint64_t seq_len, std::uint32_t index) {
  impl_->train_micro_step(seq_len, index);
}
void LlamaProgram::eval_pass(std::uint64_t batch, std::uint64_t seq_len) { impl_->eval_pass(batch, seq_len); }
std::vector<LlamaProgram::OptimizedTensor> LlamaProgram::optimized_tensors() const {
  return impl_->optimized_tensors();
}
void LlamaProgram::release_gradients() { impl_->release_gradients(); }
std::uint64_t LlamaProgram::block_activation_bytes() const { return impl_->block_activation_bytes; }

}  // namespace fragscope::plan

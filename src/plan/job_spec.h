#pragma once
/// @file job_spec.h
/// @brief The training job `fragscope plan` sizes: model shape, training setup, parallelism and
/// hardware, read from a TOML file (docs/plan.md documents every key).
///
/// Invariants after parsing: every count is ≥ 1 and within a real job's range (sizes ≤ 2^24,
/// grad_accum and world_size ≤ 2^20, sequences per step ≤ 2^40, every byte figure < 2^62), so
/// the arithmetic of the model never wraps; hidden_size is divisible by
/// num_attention_heads and num_attention_heads by num_kv_heads; strategy `none` has
/// world_size 1; the GPU is in the catalogue and the MIG profile (if any) belongs to it;
/// alloc_conf is a PYTORCH_CUDA_ALLOC_CONF PyTorch accepts; a global_batch is reachable
/// (a multiple of micro_batch_size × world_size); min_seq_len ≤ median_seq_len ≤ seq_len.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "alloc/alloc_config.h"

namespace fragscope::plan {

/// @brief The largest job spec file read (real ones are under 2 KiB).
inline constexpr std::uint64_t kMaxJobSpecBytes = std::uint64_t{1} << 20;
/// @brief The most sequences per optimizer step a spec (or --global-batch) may ask for.
inline constexpr std::uint64_t kMaxGlobalBatch = std::uint64_t{1} << 40;
/// @brief The most micro-steps per optimizer step (grad_accum) a spec, or a proposal, may have.
inline constexpr std::uint64_t kMaxGradAccum = std::uint64_t{1} << 20;

/// amp-*: torch.autocast over fp32 parameters (any strategy); mixed-bf16: bf16 compute
/// parameters with fp32 master weights and fp32 gradient reduction (FSDP2
/// MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), DeepSpeed bf16), no autocast;
/// bf16: bf16 parameters, gradients and optimizer state; fp32: no autocast.
enum class Precision { kAmpBf16, kAmpFp16, kMixedBf16, kBf16, kFp32 };
enum class Optimizer { kAdamW, kAdam, kAdamW8bit, kSgd, kLion };
/// How torch.optim runs the update: foreach (PyTorch's default on CUDA: one batched kernel per
/// op, with per-step temporaries for every tensor), fused (one kernel, no temporaries), or one
/// tensor at a time (foreach=False).
enum class OptimizerImpl { kForeach, kFused, kSingleTensor };
enum class Checkpointing { kNone, kSelective, kFull };
enum class Attention { kSdpa, kFlash, kEager };
/// standard: HF's ForCausalLMLoss (bf16 logits, fp32 upcast, log_softmax over the whole
/// vocabulary); chunked: lm_head and cross-entropy per chunk of loss_chunk_tokens, each chunk
/// recomputed in the backward; fused: a fused linear cross-entropy (Liger's
/// LigerFusedLinearCrossEntropyLoss) that never holds the full logits.
enum class Loss { kStandard, kChunked, kFused };
/// Where the optimizer's state lives: optimizer moves it and the fp32 master weights to host
/// memory (DeepSpeed ZeRO-Offload, FSDP2 CPUOffloadPolicy for the step), parameters also the
/// sharded parameters and gradients (FSDP2 CPUOffloadPolicy).
enum class CpuOffload { kNone, kOptimizer, kParameters };
enum class Strategy { kNone, kDdp, kFsdp, kZero1, kZero2, kZero3 };

std::string_view to_string(Precision value);
std::string_view to_string(Optimizer value);
std::string_view to_string(OptimizerImpl value);
std::string_view to_string(Checkpointing value);
std::string_view to_string(Attention value);
std::string_view to_string(Strategy value);
std::string_view to_string(Loss value);
std::string_view to_string(CpuOffload value);

/// @brief A Llama-style decoder: q/k/v/o projections, SwiGLU MLP, two RMSNorms per block.
struct ModelShape {
  std::string preset;  ///< the preset it started from, empty when every key was given
  std::uint64_t hidden_size = 0;
  std::uint64_t num_layers = 0;
  std::uint64_t num_attention_heads = 0;
  std::uint64_t num_kv_heads = 0;
  std::uint64_t intermediate_size = 0;
  std::uint64_t vocab_size = 0;
  bool tied_embeddings = false;

  std::uint64_t head_dim() const { return hidden_size / num_attention_heads; }
  std::uint64_t kv_dim() const { return num_kv_heads * head_dim(); }
  /// @brief Weights of the four attention and three MLP matrices of one block.
  std::uint64_t layer_matmul_parameters() const;
  /// @brief One decoder block: its matrices plus its two RMSNorm weights.
  std::uint64_t layer_parameters() const;
  /// @brief Embedding, lm_head (unless tied) and the final norm.
  std::uint64_t outer_parameters() const;
  /// @brief Everything: what `sum(p.numel() for p in model.parameters())` prints.
  std::uint64_t parameters() const;
};

struct TrainingConfig {
  std::uint64_t seq_len = 0;
  std::uint64_t micro_batch_size = 0;
  std::uint64_t grad_accum = 1;
  Precision precision = Precision::kAmpBf16;
  Optimizer optimizer = Optimizer::kAdamW;
  OptimizerImpl optimizer_impl = OptimizerImpl::kForeach;
  Checkpointing checkpointing = Checkpointing::kNone;
  /// With full checkpointing: how many blocks (the first ones) are checkpointed; all if unset.
  std::optional<std::uint64_t> checkpointed_layers;
  Attention attention = Attention::kSdpa;
  /// Sequence lengths vary per micro-step up to seq_len (packing-free data): the plan replays
  /// draws from the distribution below, and seq_len is the longest micro-step.
  bool variable_length = false;
  /// The length distribution of a variable-length job (defaults: seq_len / 16, seq_len / 4,
  /// 0.6: the fixtures' recorder's shape).
  std::optional<std::uint64_t> min_seq_len;
  std::optional<std::uint64_t> median_seq_len;
  std::optional<double> length_sigma;
  /// HF `use_cache` left on while training (transformers' default without checkpointing): the
  /// forward pass builds a DynamicCache of every layer's keys and values.
  bool use_cache = true;
  std::optional<std::uint64_t> global_batch;  ///< target sequences per optimizer step
  Loss loss = Loss::kStandard;
  std::uint64_t loss_chunk_tokens = 4096;     ///< tokens per chunk of a chunked loss
  CpuOffload cpu_offload = CpuOffload::kNone;
};

/// An evaluation pass run during training (model.eval(), no_grad, logits upcast).
struct EvalConfig {
  std::uint64_t micro_batch_size = 0;
  std::uint64_t seq_len = 0;
  std::uint64_t every = 1;  ///< optimizer steps between eval passes
};

struct ParallelConfig {
  Strategy strategy = Strategy::kNone;
  std::uint64_t world_size = 1;
};

struct HardwareConfig {
  std::string gpu;  ///< canonical catalogue name
  std::string mig;  ///< MIG profile, empty for the whole card
  /// PYTORCH_CUDA_ALLOC_CONF of the job ([hardware] alloc_conf; expandable_segments = true is
  /// shorthand for its expandable_segments:True).
  alloc::AllocConfig alloc_config;
};

struct JobSpec {
  std::string source;  ///< file name, for messages
  ModelShape model;
  TrainingConfig training;
  std::optional<EvalConfig> eval;
  ParallelConfig parallel;
  HardwareConfig hardware;

  /// @brief Sequences per optimizer step over all data-parallel ranks.
  std::uint64_t global_batch() const {
    return training.micro_batch_size * training.grad_accum * parallel.world_size;
  }
};

/// @brief The numeric regime a job runs in: torch.autocast over fp32 parameters (amp-*), low
/// precision (bf16 compute parameters: bf16, mixed-bf16), or fp32.
enum class ComputeMode { kAutocast, kLowPrecision, kFp32 };
ComputeMode compute_mode(const JobSpec& spec);

/// @brief Parses a job spec from TOML text, after applying `overrides`.
/// @param source_name names the input in error messages.
/// @param overrides "table.key=value" edits (`--set training.micro_batch_size=2`): the value
/// is TOML (a number, true/false, or a "string"; a bare word is taken as a string); the key
/// must be one the spec format knows.
/// @throws InputError on a TOML syntax error, an unknown key or table, a wrong type, a missing
/// key, an impossible value or a malformed override; what() names the file (or the override)
/// and the key.
JobSpec parse_job_spec(std::string_view toml_text, std::string_view source_name,
                       std::span<const std::string> overrides = {});

/// @brief Reads and parses a job spec file (at most kMaxJobSpecBytes; util/input_file.h), after
/// applying `overrides` as parse_job_spec.
/// @throws InputError (also when it cannot be read, is a special file or is too large).
JobSpec read_job_spec(const std::filesystem::path& path, std::span<const std::string> overrides = {});

/// @brief Checks the invariants above again (after a proposal edited a spec).
/// @throws InputError naming the offending key.
void validate(const JobSpec& spec);

}  // namespace fragscope::plan

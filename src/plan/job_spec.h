#pragma once
/// @file job_spec.h
/// @brief The training job `fragscope plan` sizes: model shape, training setup, parallelism and
/// hardware, read from a TOML file (docs/plan.md documents every key).
///
/// Invariants after parsing: every count is ≥ 1 and within a real job's range (sizes ≤ 2^24,
/// grad_accum and world_size ≤ 2^20, sequences per step ≤ 2^40, every byte figure < 2^62), so
/// the arithmetic of the model never wraps; hidden_size is divisible by
/// num_attention_heads and num_attention_heads by num_kv_heads; strategy `none` has
/// world_size 1; the GPU is in the catalogue and the MIG profile (if any) belongs to it.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace fragscope::plan {

/// @brief The largest job spec file read (real ones are under 2 KiB).
inline constexpr std::uint64_t kMaxJobSpecBytes = std::uint64_t{1} << 20;
/// @brief The most sequences per optimizer step a spec (or --global-batch) may ask for.
inline constexpr std::uint64_t kMaxGlobalBatch = std::uint64_t{1} << 40;

enum class Precision { kAmpBf16, kAmpFp16, kBf16, kFp32 };
enum class Optimizer { kAdamW, kAdam, kAdamW8bit, kSgd, kLion };
enum class Checkpointing { kNone, kSelective, kFull };
enum class Attention { kSdpa, kFlash, kEager };
enum class Strategy { kNone, kDdp, kFsdp, kZero1, kZero2, kZero3 };

std::string_view to_string(Precision value);
std::string_view to_string(Optimizer value);
std::string_view to_string(Checkpointing value);
std::string_view to_string(Attention value);
std::string_view to_string(Strategy value);

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
  Checkpointing checkpointing = Checkpointing::kNone;
  Attention attention = Attention::kSdpa;
  /// Sequence lengths vary per micro-step up to seq_len (packing-free data): more allocator
  /// headroom, and seq_len is the longest micro-step.
  bool variable_length = false;
  /// HF `use_cache` left on while training (transformers' default without checkpointing): the
  /// forward pass builds a DynamicCache of every layer's keys and values.
  bool use_cache = true;
  std::optional<std::uint64_t> global_batch;  ///< target sequences per optimizer step
};

struct ParallelConfig {
  Strategy strategy = Strategy::kNone;
  std::uint64_t world_size = 1;
};

struct HardwareConfig {
  std::string gpu;  ///< canonical catalogue name
  std::string mig;  ///< MIG profile, empty for the whole card
  bool expandable_segments = false;  ///< PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
};

struct JobSpec {
  std::string source;  ///< file name, for messages
  ModelShape model;
  TrainingConfig training;
  ParallelConfig parallel;
  HardwareConfig hardware;

  /// @brief Sequences per optimizer step over all data-parallel ranks.
  std::uint64_t global_batch() const {
    return training.micro_batch_size * training.grad_accum * parallel.world_size;
  }
};

/// @brief Parses a job spec from TOML text.
/// @param source_name names the input in error messages.
/// @throws InputError on a TOML syntax error, an unknown key or table, a wrong type, a missing
/// key or an impossible value; what() names the file and the key.
JobSpec parse_job_spec(std::string_view toml_text, std::string_view source_name);

/// @brief Reads and parses a job spec file (at most kMaxJobSpecBytes; util/input_file.h).
/// @throws InputError (also when it cannot be read, is a special file or is too large).
JobSpec read_job_spec(const std::filesystem::path& path);

/// @brief Checks the invariants above again (after a proposal edited a spec).
/// @throws InputError naming the offending key.
void validate(const JobSpec& spec);

}  // namespace fragscope::plan

#pragma once
/// @file throughput_model.h
/// @brief Tokens per second per GPU of a job, relative to another: a derived estimate, never a
/// measurement, used to price the proposals.
///
/// Time of one optimizer step = Σ over its micro-steps of max(compute, communication) (FSDP /
/// ZeRO-3 overlap their collectives with compute; what does not fit under it is exposed) +
/// the host's part of an offloaded optimizer step. Compute = FLOPs / (the card's dense bf16
/// peak × kModelFlopsUtilization × the slice's share of SMs); FLOPs per token = 6 × matmul
/// parameters + 6 × layers × hidden × seq (causal attention), plus what recomputation repeats
/// (a checkpointed block's forward, 2 × its parameters; a chunked loss's lm_head).
/// Micro-batches under kEfficientMicroBatchTokens run their GEMMs at kSmallMicroBatchEfficiency.
/// Communication per micro-step: FSDP all-gathers the parameters twice (forward, backward) and
/// reduce-scatters the gradients; ZeRO-3 the same; ZeRO-1/2 and DDP reduce once per optimizer
/// step; at kNvlinkBytesPerSecond within a node (≤ 8 GPUs), kInterNodeBytesPerSecond across
/// nodes, PCIe for L40S and for MIG slices (no P2P between instances).
/// Thread-safety: pure functions.

#include <string>

#include "plan/job_spec.h"

namespace fragscope::plan {

inline constexpr double kModelFlopsUtilization = 0.40;
inline constexpr double kEfficientMicroBatchTokens = 8192;
inline constexpr double kSmallMicroBatchEfficiency = 0.95;
inline constexpr double kNvlinkBytesPerSecond = 300e9;
inline constexpr double kInterNodeBytesPerSecond = 40e9;
inline constexpr double kPcieBytesPerSecond = 25e9;
inline constexpr double kHostAdamParametersPerSecond = 1.5e9;  // DeepSpeed CPUAdam, one socket
inline constexpr int kGpusPerNode = 8;

/// @brief Seconds per token per GPU of `spec` (the estimate above).
double seconds_per_token(const JobSpec& spec);

/// @brief Tokens/s per GPU of `proposal` relative to `base` (> 1: faster).
double throughput_factor(const JobSpec& base, const JobSpec& proposal);

/// @brief "−25.0% tokens/s per GPU (estimate)", "none", "+3.1% …".
std::string throughput_cost_text(double factor);

}  // namespace fragscope::plan

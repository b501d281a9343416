#pragma once
/// @file gpu_catalog.h
/// @brief The GPUs fragscope knows by name: memory as the driver reports it, the part a PyTorch
/// process cannot use, and the MIG slices each card can be cut into.
///
/// `total_bytes` is nvidia-smi's `memory.total` (H200: 143771 MiB, as in every fixture's
/// smi.csv). `context_reserve_bytes` is what a PyTorch process never gets for tensors: the
/// driver's own reservation (memory.total minus cudaMemGetInfo's total, e.g. H200 143771 −
/// 143157.5 MiB) plus the CUDA context and kernel images of a PyTorch 2.11 / CUDA 13 process
/// (767 MiB measured on the H200 fixtures: smi memory.used − reserved_bytes). MIG slice sizes are
/// the profile's memory fraction (eighths) of the card unless `nvidia-smi mig -lgip` figures were
/// available; docs/plan.md lists the sources per card.
///
/// Thread-safety: the catalogue is immutable static data; every function is safe to call
/// concurrently.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fragscope {

/// @brief One MIG GPU-instance profile ("3g.71gb").
struct MigProfile {
  std::string_view name;
  std::uint64_t memory_bytes;  ///< memory of one slice; never more than the whole card
  int compute_slices;          ///< the "g" count: sevenths of the SMs
  int max_instances;           ///< how many fit on one card
};

/// @brief One GPU model.
struct GpuSpec {
  std::string_view name;               ///< canonical name, e.g. "H200", "A100-80GB"
  std::uint64_t total_bytes;           ///< nvidia-smi memory.total
  std::uint64_t context_reserve_bytes; ///< driver reserve + CUDA context of a PyTorch process
  std::span<const MigProfile> mig_profiles;  ///< empty when the card has no MIG

  /// @brief Memory the caching allocator can reserve on the whole card.
  std::uint64_t usable_bytes() const { return total_bytes - context_reserve_bytes; }
  /// @brief Memory the caching allocator can reserve inside one slice of `profile`.
  std::uint64_t usable_bytes(const MigProfile& profile) const;
};

/// @brief Finds a GPU by name, ignoring case, '-', '_' and spaces ("h200", "H100 80GB",
/// "a100-sxm4-80gb" via its aliases). @return nullptr when unknown.
const GpuSpec* find_gpu(std::string_view name);

/// @brief Finds a MIG profile of `gpu` by name, ignoring case ("3g.71gb"). @return nullptr if none.
const MigProfile* find_mig_profile(const GpuSpec& gpu, std::string_view profile);

/// @brief Every canonical GPU name, in catalogue order (for error messages and --help).
std::vector<std::string_view> gpu_names();

/// @brief "A100-40GB, A100-80GB, …": gpu_names() joined for one-line error messages.
std::string gpu_names_joined();

}  // namespace fragscope

#pragma once
/// @file nvml.h
/// @brief NVIDIA's management library, loaded at run time with dlopen: the agent has no build-
/// or run-time dependency on the driver and keeps serving rank data on a machine without one.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fragscope::agent {

/// @brief One compute process on a GPU as NVML sees it.
struct GpuProcess {
  std::uint32_t pid = 0;  ///< in the host's PID namespace
  std::optional<std::uint64_t> used_bytes;  ///< absent when NVML withholds it (MIG, permissions)
};

/// @brief One MIG GPU instance of a GPU in MIG mode.
struct MigInstance {
  std::uint32_t gpu_instance_id = 0;
  std::uint64_t used_bytes = 0;
  std::uint64_t total_bytes = 0;
};

/// @brief What the driver says about one GPU: nvidia-smi's view, beside the allocator's.
struct GpuSample {
  std::uint32_t index = 0;
  std::string uuid;  ///< "GPU-…"
  std::uint64_t used_bytes = 0;
  std::uint64_t free_bytes = 0;
  std::uint64_t total_bytes = 0;
  std::optional<double> utilization_ratio;  ///< 0..1, absent under MIG
  bool mig_enabled = false;
  std::vector<MigInstance> mig_instances;
  std::vector<GpuProcess> processes;
};

/// @brief A poll's worth of NVML data; `up` is false when NVML is missing or failed.
struct NvmlSample {
  bool up = false;
  std::string problem;  ///< one line, set when !up
  std::vector<GpuSample> gpus;
};

/// @brief Owns a dlopen'ed NVML and its nvmlInit_v2/nvmlShutdown pair.
///
/// Never throws for a missing or broken library: up() is false and problem() says why, and
/// retry() tries again (a driver still loading when the agent started). The compute process
/// list is optional (_v3, else _v2, else the unversioned entry point; its entry size read off
/// what the driver wrote, since drivers 535.43 to 535.86 write larger entries than _v3 promises):
/// without it a GPU has no processes, its other metrics stay.
/// Thread-safety: one thread at a time (the agent's poll loop).
class Nvml {
 public:
  /// @param library dlopen name or path; "libnvidia-ml.so.1" finds the driver's copy.
  explicit Nvml(std::string library = "libnvidia-ml.so.1");
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool up() const;
  const std::string& problem() const;

  /// @brief Loads and initialises the library again if it is not up. @return up()
  bool retry();

  /// @brief Memory, utilisation, processes and MIG instances of every GPU. A GPU whose memory
  /// query fails is left out; a failing device count yields up == false.
  NvmlSample sample() const;

 private:
  struct Api;
  void load();
  /// The compute processes on `device` (an nvmlDevice_t); none when the driver's answer is not
  /// one of the known layouts.
  static std::vector<GpuProcess> processes_of(const Api& api, void* device);

  std::string library_;
  std::unique_ptr<Api> api_;
  std::string problem_;
};

}  // namespace fragscope::agent

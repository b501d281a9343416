#include "agent/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstring>

#include <fmt/format.h>

namespace fragscope::agent {
namespace {

// The few NVML types the agent needs, declared from NVIDIA's documented ABI (nvml.h).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr unsigned int kMigEnabled = 1;
constexpr std::size_t kUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned long long kValueNotAvailable = ULLONG_MAX;

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
// The process list's entries: pid (u32) then usedGpuMemory (u64) at offset 8, whatever the entry
// version. Their size is not what the entry point's name promises: _v3 writes 24-byte
// nvmlProcessInfo_v2_t entries, except drivers 535.43 to 535.86, which write the 32-byte
// nvmlProcessInfo_v3_t (nvitop #79, #89, #94; go-nvml #75); 535.98 has no _v3 at all. So the
// buffer holds kProcessEntryRoom bytes per entry the driver is told it may write, and the entry
// size is read off the buffer (process_entry_size).
constexpr std::size_t kProcessEntryRoom = 64;
constexpr std::size_t kProcessEntrySizes[] = {16, 24, 32};  // nvmlProcessInfo_v1_t, _v2_t, _v3_t
constexpr std::byte kUnwritten{0xa5};
constexpr const char* kProcessEntryPoints[] = {"nvmlDeviceGetComputeRunningProcesses_v3",
                                               "nvmlDeviceGetComputeRunningProcesses_v2",
                                               "nvmlDeviceGetComputeRunningProcesses"};

/// The size of the `count` entries the driver wrote into `buffer` (filled with kUnwritten before):
/// the smallest known size past whose last entry nothing was written; 0 when none fits.
std::size_t process_entry_size(const std::vector<std::byte>& buffer, std::size_t count) {
  for (const std::size_t size : kProcessEntrySizes) {
    const auto end = buffer.begin() + static_cast<std::ptrdiff_t>(count * kProcessEntryRoom);
    if (std::all_of(buffer.begin() + static_cast<std::ptrdiff_t>(count * size), end,
                    [](std::byte b) { return b == kUnwritten; })) {
      return size;
    }
  }
  return 0;
}

template <typename Fn>
Fn resolve(void* handle, const char* name, std::string& missing) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr && missing.empty()) missing = name;
  return reinterpret_cast<Fn>(symbol);
}

}  // namespace

struct Nvml::Api {
  void* handle = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*device_count)(unsigned int*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned int*, void*) = nullptr;  ///< nullptr: no process list
  nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned int*, unsigned int*) = nullptr;
  nvmlReturn_t (*max_mig_devices)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*mig_by_index)(nvmlDevice_t, unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*gpu_instance_id)(nvmlDevice_t, unsigned int*) = nullptr;

  std::string describe(nvmlReturn_t code) const {
    return error_string != nullptr ? error_string(code) : fmt::format("NVML error {}", code);
  }
};

Nvml::Nvml(std::string library) : library_(std::move(library)) { load(); }

void Nvml::load() {
  auto api = std::make_unique<Api>();
  api->handle = dlopen(library_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api->handle == nullptr) {
    const char* why = dlerror();
    problem_ = fmt::format("cannot load {}: {}", library_, why != nullptr ? why : "unknown error");
    return;
  }
  std::string missing;
  void* h = api->handle;
  api->init = resolve<decltype(api->init)>(h, "nvmlInit_v2", missing);
  api->shutdown = resolve<decltype(api->shutdown)>(h, "nvmlShutdown", missing);
  api->error_string = resolve<decltype(api->error_string)>(h, "nvmlErrorString", missing);
  api->device_count = resolve<decltype(api->device_count)>(h, "nvmlDeviceGetCount_v2", missing);
  api->handle_by_index = resolve<decltype(api->handle_by_index)>(h, "nvmlDeviceGetHandleByIndex_v2", missing);
  api->uuid = resolve<decltype(api->uuid)>(h, "nvmlDeviceGetUUID", missing);
  api->memory = resolve<decltype(api->memory)>(h, "nvmlDeviceGetMemoryInfo", missing);
  api->utilization = resolve<decltype(api->utilization)>(h, "nvmlDeviceGetUtilizationRates", missing);
  // Optional: without a process list the device metrics still stand.
  for (const char* name : kProcessEntryPoints) {
    if (api->processes == nullptr) api->processes = reinterpret_cast<decltype(api->processes)>(dlsym(h, name));
  }
  // MIG entry points are optional: an old driver simply has no MIG.
  std::string no_mig;
  api->mig_mode = resolve<decltype(api->mig_mode)>(h, "nvmlDeviceGetMigMode", no_mig);
  api->max_mig_devices = resolve<decltype(api->max_mig_devices)>(h, "nvmlDeviceGetMaxMigDeviceCount", no_mig);
  api->mig_by_index = resolve<decltype(api->mig_by_index)>(h, "nvmlDeviceGetMigDeviceHandleByIndex", no_mig);
  api->gpu_instance_id = resolve<decltype(api->gpu_instance_id)>(h, "nvmlDeviceGetGpuInstanceId", no_mig);
  if (!no_mig.empty()) api->mig_mode = nullptr;
  if (!missing.empty()) {
    problem_ = fmt::format("{} lacks {}", library_, missing);
    dlclose(api->handle);
    return;
  }
  if (const nvmlReturn_t code = api->init(); code != kSuccess) {
    problem_ = fmt::format("nvmlInit_v2 failed: {}", api->describe(code));
    dlclose(api->handle);
    return;
  }
  problem_.clear();
  api_ = std::move(api);
}

bool Nvml::retry() {
  if (!api_) load();
  return up();
}

Nvml::~Nvml() {
  if (api_) {
    api_->shutdown();
    dlclose(api_->handle);
  }
}

bool Nvml::up() const { return api_ != nullptr; }

std::vector<GpuProcess> Nvml::processes_of(const Api& api, void* device) {
  std::vector<std::byte> buffer(16 * kProcessEntryRoom);
  unsigned int count = 0;
  nvmlReturn_t code = kInsufficientSize;
  // Processes can start between two calls: try a few times with room to spare.
  for (int attempt = 0; attempt < 3 && code == kInsufficientSize; ++attempt) {
    if (attempt > 0) buffer.resize((count + 8) * kProcessEntryRoom);
    std::fill(buffer.begin(), buffer.end(), kUnwritten);
    count = static_cast<unsigned int>(buffer.size() / kProcessEntryRoom);
    code = api.processes(static_cast<nvmlDevice_t>(device), &count, buffer.data());
  }
  std::vector<GpuProcess> processes;
  const std::size_t entry_size = code == kSuccess && count * kProcessEntryRoom <= buffer.size()
                                     ? process_entry_size(buffer, count)
                                     : 0;
  if (entry_size == 0) return processes;  // unknown: better none than wrong ones
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t pid = 0;
    std::uint64_t used = 0;
    std::memcpy(&pid, buffer.data() + i * entry_size, sizeof pid);
    std::memcpy(&used, buffer.data() + i * entry_size + 8, sizeof used);
    GpuProcess process{.pid = pid, .used_bytes = std::nullopt};
    if (used != kValueNotAvailable) process.used_bytes = used;
    processes.push_back(process);
  }
  return processes;
}

const std::string& Nvml::problem() const { return problem_; }

NvmlSample Nvml::sample() const {
  NvmlSample out;
  if (!api_) {
    out.problem = problem_;
    return out;
  }
  const Api& api = *api_;
  unsigned int count = 0;
  if (const nvmlReturn_t code = api.device_count(&count); code != kSuccess) {
    out.problem = fmt::format("nvmlDeviceGetCount_v2 failed: {}", api.describe(code));
    return out;
  }
  out.up = true;
  for (unsigned int index = 0; index < count; ++index) {
    nvmlDevice_t device = nullptr;
    nvmlMemory_t memory{};
    if (api.handle_by_index(index, &device) != kSuccess || api.memory(device, &memory) != kSuccess) continue;
    GpuSample gpu;
    gpu.index = index;
    gpu.used_bytes = memory.used;
    gpu.free_bytes = memory.free;
    gpu.total_bytes = memory.total;
    std::array<char, kUuidBufferSize> uuid{};
    if (api.uuid(device, uuid.data(), static_cast<unsigned int>(uuid.size())) == kSuccess) gpu.uuid = uuid.data();
    nvmlUtilization_t utilization{};
    if (api.utilization(device, &utilization) == kSuccess) gpu.utilization_ratio = utilization.gpu / 100.0;
    if (api.processes != nullptr) gpu.processes = processes_of(api, device);
    unsigned int current = 0, pending = 0, max_mig = 0;
    if (api.mig_mode != nullptr && api.mig_mode(device, &current, &pending) == kSuccess &&
        current == kMigEnabled && api.max_mig_devices(device, &max_mig) == kSuccess) {
      gpu.mig_enabled = true;
      for (unsigned int m = 0; m < max_mig; ++m) {
        nvmlDevice_t mig = nullptr;
        nvmlMemory_t mig_memory{};
        unsigned int instance = 0;
        if (api.mig_by_index(device, m, &mig) != kSuccess || api.memory(mig, &mig_memory) != kSuccess ||
            api.gpu_instance_id(mig, &instance) != kSuccess) {
          continue;  // unpopulated slot
        }
        gpu.mig_instances.push_back({instance, mig_memory.used, mig_memory.total});
      }
    }
    out.gpus.push_back(std::move(gpu));
  }
  return out;
}

}  // namespace fragscope::agent

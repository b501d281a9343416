// A stand-in libnvidia-ml for tests and bench/agent: the entry points the agent resolves, with
// NVML's C ABI, describing H200-sized GPUs: two by default, FRAGSCOPE_FAKE_NVML_GPUS (up to 16)
// for the benchmark. GPU 1 is in MIG mode with two GPU instances.
// Built three ways (tests/agent/CMakeLists.txt): as current drivers are (_v3 with 24-byte
// entries, three processes on GPU 0); with FAKE_NVML_DRIVER_535_86 as drivers 535.43 to 535.86
// (_v3 writing 32-byte entries, fourteen processes: more than 16 × 24 bytes hold); with
// FAKE_NVML_DRIVER_535_98 as 535.98 (no _v3, only _v2).
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {

struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
#ifdef FAKE_NVML_DRIVER_535_86
struct nvmlProcessInfo_t {  // nvmlProcessInfo_v3_t
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
  unsigned long long usedGpuCcProtectedMemory;
};
#else
struct nvmlProcessInfo_t {  // nvmlProcessInfo_v2_t
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
};
#endif
using nvmlDevice_t = void*;

static int devices[16];
static int mig_devices[2];
static constexpr unsigned long long kTotal = 150'754'820'096ull;  // H200 as NVML reports it

int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int) { return "fake error"; }
static unsigned int gpu_count() {
  const char* wanted = std::getenv("FRAGSCOPE_FAKE_NVML_GPUS");
  const int n = wanted != nullptr ? std::atoi(wanted) : 2;
  return n >= 1 && n <= 16 ? static_cast<unsigned int>(n) : 2;
}
int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = gpu_count();
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (index >= gpu_count()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &devices[index];
  return 0;
}
static int index_of(nvmlDevice_t device) { return static_cast<int>(static_cast<int*>(device) - devices); }
static bool is_mig(nvmlDevice_t device) { return device == &mig_devices[0] || device == &mig_devices[1]; }

int nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  static const char* const kFirstTwo[] = {"GPU-aaaaaaaa-0000-0000-0000-000000000000",
                                          "GPU-bbbbbbbb-1111-1111-1111-111111111111"};
  const int index = index_of(device);
  char other[64];
  std::snprintf(other, sizeof other, "GPU-cccccccc-0000-0000-0000-%012d", index);
  std::strncpy(uuid, index < 2 ? kFirstTwo[index] : other, length);
  return 0;
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  if (is_mig(device)) {
    const unsigned long long total = 71'000'000'000ull;
    const unsigned long long used = device == &mig_devices[0] ? 1'000'000'000ull : 2'000'000'000ull;
    *memory = {total, total - used, used};
    return 0;
  }
  const unsigned long long used = index_of(device) == 0 ? 140'000'000'000ull : 3'000'000'000ull;
  *memory = {kTotal, kTotal - used, used};
  return 0;
}
int nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  if (index_of(device) == 1) return 3;  // NVML_ERROR_NOT_SUPPORTED under MIG
  *utilization = {87, 40};
  return 0;
}
static int running_processes(nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos) {
  if (index_of(device) == 1) {
    *count = 0;
    return 0;
  }
#ifdef FAKE_NVML_DRIVER_535_86
  nvmlProcessInfo_t all[14] = {};
  for (unsigned int i = 0; i < 14; ++i) all[i] = {2001 + i, (i + 1) * 1'000'000'000ull, 0, 0, 0};
#else
  // Three processes: more than the caller may have room for on the first call.
  const nvmlProcessInfo_t all[] = {{1001, 100'000'000'000ull, 0, 0},
                                   {1002, 30'000'000'000ull, 0, 0},
                                   {1003, ~0ull, 0, 0}};  // NVML_VALUE_NOT_AVAILABLE
#endif
  constexpr unsigned int n = sizeof all / sizeof all[0];
  if (*count < n) {
    *count = n;
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  *count = n;
  std::memcpy(infos, all, sizeof all);
  return 0;
}
#ifdef FAKE_NVML_DRIVER_535_98
int nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos) {
  return running_processes(device, count, infos);
}
#else
int nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos) {
  return running_processes(device, count, infos);
}
#endif
int nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current, unsigned int* pending) {
  *current = *pending = index_of(device) == 1 ? 1 : 0;
  return 0;
}
int nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t, unsigned int* count) {
  *count = 3;  // the third slot is unpopulated
  return 0;
}
int nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t, unsigned int index, nvmlDevice_t* mig) {
  if (index > 1) return 6;  // NVML_ERROR_NOT_FOUND
  *mig = &mig_devices[index];
  return 0;
}
int nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  *id = device == &mig_devices[0] ? 1 : 2;
  return 0;
}

}  // extern "C"

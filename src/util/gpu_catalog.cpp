#include "util/gpu_catalog.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include "util/bytes.h"

namespace fragscope {
namespace {

// CUDA context and kernel images of a PyTorch 2.11 / CUDA 13 process: nvidia-smi memory.used
// minus reserved_bytes on the H200 fixtures (plan_p1: 38069 MiB − 37301.6 MiB).
constexpr std::uint64_t kProcessContext = 767 * kMiB;

// The driver's reservation: memory.total minus the total cudaMemGetInfo reports ("GPU 0 has a
// total capacity of … GiB" in PyTorch's OOM message). H200 from the fixtures (150109880320 B);
// A100/H100/L40S from OOM messages in the wild (79.15, 39.59, 79.19, 44.53 GiB); cards without a
// figure take the H200's.
constexpr std::uint64_t kH200DriverReserve = 614 * kMiB;

/// One slice of `eighths`/8 of a card's memory: the MIG profile's memory fraction.
constexpr std::uint64_t eighths(std::uint64_t total_mib, std::uint64_t n) { return n * total_mib * kMiB / 8; }

constexpr std::uint64_t kA100_40 = 40960, kA100_80 = 81920, kH100_80 = 81559, kH100_94 = 95830,
                        kH200 = 143771, kB200 = 183359, kL40S = 46068;

constexpr std::array<MigProfile, 5> kA100_40Mig{{
    {"1g.5gb", eighths(kA100_40, 1), 1, 7},
    {"2g.10gb", eighths(kA100_40, 2), 2, 3},
    {"3g.20gb", eighths(kA100_40, 4), 3, 2},
    {"4g.20gb", eighths(kA100_40, 4), 4, 1},
    {"7g.40gb", eighths(kA100_40, 8), 7, 1},
}};

/// The six profiles of an 80 GB-class A100, H100-94GB, H200 and B200: 1/8, 2/8, 2/8, 4/8, 4/8
/// and the whole card, with these compute slices and instance counts.
constexpr std::array<MigProfile, 6> eighth_profiles(std::uint64_t total_mib,
                                                    const std::array<std::string_view, 6>& names) {
  return {{
      {names[0], eighths(total_mib, 1), 1, 7},
      {names[1], eighths(total_mib, 2), 1, 4},
      {names[2], eighths(total_mib, 2), 2, 3},
      {names[3], eighths(total_mib, 4), 3, 2},
      {names[4], eighths(total_mib, 4), 4, 1},
      {names[5], eighths(total_mib, 8), 7, 1},
  }};
}
constexpr auto kA100_80Mig =
    eighth_profiles(kA100_80, {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"});

// `nvidia-smi mig -lgip` on an H100-80GB: 9.75, 19.62, 19.62, 39.50, 39.50, 79.25 GiB.
constexpr std::array<MigProfile, 6> kH100_80Mig{{
    {"1g.10gb", 9984 * kMiB, 1, 7},
    {"1g.20gb", 20096 * kMiB, 1, 4},
    {"2g.20gb", 20096 * kMiB, 2, 3},
    {"3g.40gb", 40448 * kMiB, 3, 2},
    {"4g.40gb", 40448 * kMiB, 4, 1},
    {"7g.80gb", 81152 * kMiB, 7, 1},
}};

constexpr auto kH100_94Mig =
    eighth_profiles(kH100_94, {"1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"});
constexpr auto kH200Mig = eighth_profiles(kH200, {"1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"});
constexpr auto kB200Mig = eighth_profiles(kB200, {"1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"});

const std::array<GpuSpec, 7> kGpus{{
    {"A100-40GB", kA100_40 * kMiB, 420 * kMiB + kProcessContext, kA100_40Mig},
    {"A100-80GB", kA100_80 * kMiB, 870 * kMiB + kProcessContext, kA100_80Mig},
    {"H100-80GB", kH100_80 * kMiB, 468 * kMiB + kProcessContext, kH100_80Mig},
    {"H100-94GB", kH100_94 * kMiB, kH200DriverReserve + kProcessContext, kH100_94Mig},
    {"H200", kH200 * kMiB, kH200DriverReserve + kProcessContext, kH200Mig},
    {"B200", kB200 * kMiB, kH200DriverReserve + kProcessContext, kB200Mig},
    {"L40S", kL40S * kMiB, 470 * kMiB + kProcessContext, {}},
}};

struct Alias {
  std::string_view alias;
  std::string_view canonical;
};
// Product names as nvidia-smi and cloud catalogues spell them.
constexpr std::array<Alias, 14> kAliases{{
    {"A100-SXM4-40GB", "A100-40GB"}, {"A100-PCIE-40GB", "A100-40GB"},
    {"A100-SXM4-80GB", "A100-80GB"}, {"A100-PCIE-80GB", "A100-80GB"},
    {"H100", "H100-80GB"},           {"H100-SXM", "H100-80GB"},
    {"H100-SXM5-80GB", "H100-80GB"}, {"H100-PCIE", "H100-80GB"},
    {"H100-80GB-HBM3", "H100-80GB"}, {"H100-NVL", "H100-94GB"},
    {"H200-141GB", "H200"},          {"H200-SXM", "H200"},
    {"H200-NVL", "H200"},            {"B200-180GB", "B200"},
}};

/// Lower-case, without '-', '_', ' ' and a leading "nvidia".
std::string normalize(std::string_view name) {
  std::string out;
  for (char c : name)
    if (c != '-' && c != '_' && c != ' ') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (out.starts_with("nvidia")) out.erase(0, 6);
  return out;
}

}  // namespace

std::uint64_t GpuSpec::usable_bytes(const MigProfile& profile) const {
  return profile.memory_bytes > context_reserve_bytes ? profile.memory_bytes - context_reserve_bytes : 0;
}

const GpuSpec* find_gpu(std::string_view name) {
  const std::string key = normalize(name);
  if (key.empty()) return nullptr;
  for (const auto& gpu : kGpus)
    if (normalize(gpu.name) == key) return &gpu;
  for (const auto& alias : kAliases)
    if (normalize(alias.alias) == key) return find_gpu(alias.canonical);
  return nullptr;
}

const MigProfile* find_mig_profile(const GpuSpec& gpu, std::string_view profile) {
  const std::string key = normalize(profile);
  auto it = std::find_if(gpu.mig_profiles.begin(), gpu.mig_profiles.end(),
                         [&](const MigProfile& p) { return normalize(p.name) == key; });
  return it == gpu.mig_profiles.end() ? nullptr : &*it;
}

std::vector<std::string_view> gpu_names() {
  std::vector<std::string_view> names;
  for (const auto& gpu : kGpus) names.push_back(gpu.name);
  return names;
}

std::string gpu_names_joined() {
  std::string joined;
  for (auto name : gpu_names()) {
    if (!joined.empty()) joined += ", ";
    joined += name;
  }
  return joined;
}

}  // namespace fragscope

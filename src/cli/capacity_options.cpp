#include "cli/capacity_options.h"

#include <fmt/format.h>

#include "util/bytes.h"
#include "util/error.h"
#include "util/gpu_catalog.h"

namespace fragscope::cli {
namespace {

std::optional<std::uint64_t> bytes_flag(const std::string& text, std::string_view flag) {
  if (text.empty()) return std::nullopt;
  const auto bytes = parse_bytes(text);
  if (!bytes || *bytes == 0) {
    throw InputError(fmt::format("{}: '{}' is not a byte count (e.g. 40GiB, 42805960704)", flag, text));
  }
  return bytes;
}

}  // namespace

replay::CapacityRequest CapacityFlags::request() const {
  replay::CapacityRequest r;
  r.capacity_bytes = bytes_flag(capacity, "--capacity");
  if (!gpu.empty()) r.gpu = gpu;
  r.memory_fraction = memory_fraction;
  r.device_memory = bytes_flag(device_memory, "--device-memory");
  r.unlimited = unlimited;
  return r;
}

void add_capacity_flags(CLI::App* cmd, CapacityFlags& flags) {
  cmd->add_option("--capacity", flags.capacity,
                  "bytes the process may hold on the GPU (cudaMalloc fails beyond), e.g. 40GiB; "
                  "default: what the trace recorded (its OOM), else unlimited");
  cmd->add_option("--gpu", flags.gpu,
                  fmt::format("a GPU by name, less its CUDA-context reserve ({})",
                              gpu_names_joined()));
  cmd->add_flag("--unlimited", flags.unlimited, "ignore the trace's OOM: an unlimited device");
  cmd->add_option("--memory-fraction", flags.memory_fraction,
                  "model torch.cuda.set_per_process_memory_fraction(F) (needs --device-memory "
                  "or --gpu)");
  cmd->add_option("--device-memory", flags.device_memory,
                  "the GPU's total memory for --memory-fraction (torch's totalGlobalMem)");
  cmd->add_option("--device", flags.device, "trace device to replay (default: the busiest)")
      ->check(CLI::NonNegativeNumber);
}

}  // namespace fragscope::cli

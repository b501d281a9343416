#include "cli/capacity_options.h"

#include <fmt/format.h>

#include "cli/flag_checks.h"
#include "util/gpu_catalog.h"

namespace fragscope::cli {

replay::CapacityRequest CapacityFlags::request() const {
  replay::CapacityRequest r;
  r.capacity_bytes = parse_size_flag(capacity, "--capacity");
  if (!gpu.empty()) r.gpu = gpu;
  r.memory_fraction = memory_fraction;
  r.device_memory = parse_size_flag(device_memory, "--device-memory");
  r.unlimited = unlimited;
  return r;
}

void add_capacity_flags(CLI::App* cmd, CapacityFlags& flags) {
  cmd->footer(kSizesHelp);
  cmd->add_option("--capacity", flags.capacity,
                  "memory the process may hold on the GPU (cudaMalloc fails beyond), with a unit: 40GiB, 40GB; "
                  "default: what the trace recorded (its OOM), else unlimited")
      ->type_name("SIZE")
      ->check(size_value());
  cmd->add_option("--gpu", flags.gpu,
                  fmt::format("a GPU by name, less its CUDA-context reserve ({})",
                              gpu_names_joined()))
      ->type_name("GPU");
  cmd->add_flag("--unlimited", flags.unlimited, "ignore the trace's OOM: an unlimited device");
  cmd->add_option("--memory-fraction", flags.memory_fraction,
                  "model torch.cuda.set_per_process_memory_fraction(F) (needs --device-memory "
                  "or --gpu)")
      ->type_name("F");
  cmd->add_option("--device-memory", flags.device_memory,
                  "the GPU's total memory for --memory-fraction (torch's totalGlobalMem), with a unit")
      ->type_name("SIZE")
      ->check(size_value());
  cmd->add_option("--device", flags.device, "trace device to replay (default: the busiest)")
      ->type_name("N")
      ->check(whole_number(0, kMaxDeviceOrdinal));
}

}  // namespace fragscope::cli

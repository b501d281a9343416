#include "plan/throughput_model.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "util/gpu_catalog.h"

namespace fragscope::plan {
namespace {

/// Dense bf16 tensor-core peak (no sparsity), from the vendors' data sheets.
double peak_flops(const JobSpec& spec) {
  struct Peak {
    std::string_view gpu;
    double flops;
  };
  constexpr Peak kPeaks[] = {{"A100-40GB", 312e12}, {"A100-80GB", 312e12}, {"H100-80GB", 989e12}, {"H100-94GB", 989e12},
                             {"H200", 989e12},      {"B200", 2250e12},     {"L40S", 362e12}};
  double peak = 989e12;
  for (const auto& p : kPeaks)
    if (p.gpu == spec.hardware.gpu) peak = p.flops;
  if (!spec.hardware.mig.empty())
    if (const MigProfile* slice = find_mig_profile(*find_gpu(spec.hardware.gpu), spec.hardware.mig))
      peak *= slice->compute_slices / 7.0;
  if (spec.training.precision == Precision::kFp32) peak /= 2;  // TF32 tensor cores
  return peak;
}

double link_bytes_per_second(const JobSpec& spec) {
  if (!spec.hardware.mig.empty() || spec.hardware.gpu == "L40S") return kPcieBytesPerSecond;
  return spec.parallel.world_size > kGpusPerNode ? kInterNodeBytesPerSecond : kNvlinkBytesPerSecond;
}

}  // namespace

double seconds_per_token(const JobSpec& spec) {
  const ModelShape& m = spec.model;
  const TrainingConfig& t = spec.training;
  const double L = static_cast<double>(m.num_layers);
  const double block = static_cast<double>(m.layer_matmul_parameters());
  const double head = static_cast<double>(m.vocab_size * m.hidden_size);
  const double seq = static_cast<double>(t.seq_len);
  const double attention = 6.0 * L * static_cast<double>(m.hidden_size) * seq;
  double flops = 6.0 * (L * block + head) + attention;
  if (t.checkpointing == Checkpointing::kFull) {
    const double recomputed = static_cast<double>(t.checkpointed_layers.value_or(m.num_layers));
    flops += recomputed * (2.0 * block + attention / 3.0 / L);
  } else if (t.checkpointing == Checkpointing::kSelective) {
    flops += attention / 3.0;
  }
  if (t.loss == Loss::kChunked) flops += 2.0 * head;
  const double tokens = static_cast<double>(t.micro_batch_size) * seq;
  double efficiency = kModelFlopsUtilization;
  if (tokens < kEfficientMicroBatchTokens) efficiency *= kSmallMicroBatchEfficiency;
  const double compute = flops * tokens / (peak_flops(spec) * efficiency);  // one micro-step

  const double N = static_cast<double>(spec.parallel.world_size);
  const double P = static_cast<double>(m.parameters());
  const double share = N > 1 ? (N - 1) / N : 0.0;
  const double gathered = compute_mode(spec) == ComputeMode::kLowPrecision ? 2.0 : 4.0;
  double per_micro_step = 0, per_step = 0;
  switch (spec.parallel.strategy) {
    case Strategy::kFsdp:
    case Strategy::kZero3:
      per_micro_step = (2 * gathered * P + 4 * P) * share;
      break;
    case Strategy::kZero1:
    case Strategy::kZero2:
    case Strategy::kDdp:
      per_step = 2 * 4 * P * share;
      break;  // one all-reduce of the gradients
    case Strategy::kNone:
      break;
  }
  const double link = link_bytes_per_second(spec);
  const double ga = static_cast<double>(t.grad_accum);
  double step = ga * std::max(compute, per_micro_step / link) + per_step / link;
  if (t.cpu_offload != CpuOffload::kNone) {
    const double shard = P / N;  // gradients down, parameters up, and the host's Adam
    step += 2 * 2 * shard / kPcieBytesPerSecond + shard / kHostAdamParametersPerSecond;
  }
  return step / (ga * tokens);
}

double throughput_factor(const JobSpec& base, const JobSpec& proposal) {
  return seconds_per_token(base) / seconds_per_token(proposal);
}

std::string throughput_cost_text(double factor) {
  if (std::abs(factor - 1.0) < 0.0005) return "none";
  return fmt::format("{}{:.1f}% tokens/s per GPU (estimate)", factor > 1 ? "+" : "−", std::abs(factor - 1.0) * 100.0);
}

}  // namespace fragscope::plan

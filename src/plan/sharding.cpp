#include "plan/sharding.h"

#include <algorithm>

namespace fragscope::plan {
namespace {

/// Bytes of optimizer state per parameter, given the parameter's own element size.
std::uint64_t state_bytes_per_param(Optimizer o, std::uint64_t param_bytes) {
  switch (o) {
    case Optimizer::kAdamW:
    case Optimizer::kAdam: return 2 * param_bytes;  // exp_avg, exp_avg_sq
    case Optimizer::kAdamW8bit: return 2;          // bitsandbytes: one byte each (+ tiny absmax)
    case Optimizer::kSgd:
    case Optimizer::kLion: return param_bytes;     // momentum / exp_avg
  }
  return 0;
}

/// The foreach update's temporaries per parameter: sqrt(exp_avg_sq) (Adam), sign input (Lion).
std::uint64_t temp_bytes_per_param(Optimizer o, std::uint64_t param_bytes) {
  return (o == Optimizer::kAdamW || o == Optimizer::kAdam || o == Optimizer::kLion) ? param_bytes : 0;
}

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

}  // namespace

StateBytes state_bytes(const JobSpec& spec) {
  const ModelShape& m = spec.model;
  const std::uint64_t P = m.parameters();
  const std::uint64_t N = spec.parallel.world_size;
  const Precision precision = spec.training.precision;
  const Optimizer optimizer = spec.training.optimizer;
  // Parameter element size as stored (master weights under amp are fp32).
  const std::uint64_t pb = precision == Precision::kBf16 ? 2 : 4;
  const std::uint64_t mlp_params = 3 * m.hidden_size * m.intermediate_size;
  StateBytes s;
  switch (spec.parallel.strategy) {
    case Strategy::kNone:
    case Strategy::kDdp:
      s.parameters = pb * P;
      s.gradients = pb * P;
      s.optimizer_state = state_bytes_per_param(optimizer, pb) * P;
      s.optimizer_temporaries = temp_bytes_per_param(optimizer, pb) * P;
      if (spec.parallel.strategy == Strategy::kDdp) s.ddp_buckets = pb * P;
      s.outer_gradients = pb * (m.outer_parameters() - (m.tied_embeddings ? 0 : m.vocab_size * m.hidden_size));
      s.gradients_per_layer = pb * m.layer_parameters();
      s.mlp_gradients_per_layer = pb * mlp_params;
      break;
    case Strategy::kFsdp: {
      const std::uint64_t compute = precision == Precision::kFp32 ? 4 : 2;  // param_dtype
      s.parameters = ceil_div(pb * P, N);
      s.gradients = ceil_div(pb * P, N);  // reduce_dtype fp32 under amp
      s.optimizer_state = ceil_div(state_bytes_per_param(optimizer, pb) * P, N);
      s.optimizer_temporaries = ceil_div(temp_bytes_per_param(optimizer, pb) * P, N);
      s.gathered_outer = compute * m.outer_parameters();
      s.gathered_layers = 2 * compute * m.layer_parameters() + (compute + 4) * m.layer_parameters();
      s.outer_gradients = ceil_div(pb * m.outer_parameters(), N);
      s.gradients_per_layer = ceil_div(pb * m.layer_parameters(), N);
      s.mlp_gradients_per_layer = ceil_div(pb * mlp_params, N);
      break;
    }
    case Strategy::kZero1:
    case Strategy::kZero2:
    case Strategy::kZero3: {
      // fp32 precision trains without master copies; otherwise bf16 model + fp32 master partition.
      const bool fp32 = precision == Precision::kFp32;
      const std::uint64_t model_bytes = fp32 ? 4 : 2;
      const std::uint64_t master = fp32 ? 0 : 4;
      const std::uint64_t opt = master + state_bytes_per_param(optimizer, 4);
      s.optimizer_state = ceil_div(opt * P, N);
      if (spec.parallel.strategy == Strategy::kZero3) {
        // 18P/N = bf16 parameter partition 2 + fp32 gradient partition 4 + master and Adam 12;
        // plus 4 B per parameter of the largest layer, gathered with its gradient.
        s.parameters = ceil_div(model_bytes * P, N);
        s.gradients = ceil_div(4 * P, N);
        s.gathered_outer = 4 * std::max(m.layer_parameters(), m.vocab_size * m.hidden_size);
        s.outer_gradients = ceil_div(4 * m.outer_parameters(), N);
        s.gradients_per_layer = ceil_div(4 * m.layer_parameters(), N);
        s.mlp_gradients_per_layer = ceil_div(4 * mlp_params, N);
      } else {
        // 4P + 16P/N = bf16 parameters 2 + bf16 gradients 2 + (fp32 gradient partition 4 +
        // master and Adam 12) / N.
        s.parameters = model_bytes * P;
        s.gradients = model_bytes * P + ceil_div(4 * P, N);
        s.outer_gradients = model_bytes * m.outer_parameters();
        s.gradients_per_layer = model_bytes * m.layer_parameters();
        s.mlp_gradients_per_layer = model_bytes * mlp_params;
      }
      break;  // DeepSpeed's fused Adam updates in place: no foreach temporaries
    }
  }
  return s;
}

}  // namespace fragscope::plan

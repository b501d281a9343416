#include "plan/training_program.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

#include "plan/llama_program.h"
#include "plan/optimizer_program.h"

namespace fragscope::plan {

std::vector<std::uint64_t> draw_lengths(const JobSpec& spec, std::size_t count, std::uint64_t seed) {
  const TrainingConfig& t = spec.training;
  const std::uint64_t longest = t.seq_len;
  const std::uint64_t shortest = t.min_seq_len.value_or(std::max<std::uint64_t>(1, longest / 16));
  const double median = static_cast<double>(t.median_seq_len.value_or(std::max<std::uint64_t>(1, longest / 4)));
  const double sigma = t.length_sigma.value_or(0.6);
  std::mt19937_64 rng(seed);
  auto uniform = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };  // [0, 1), portable
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; i < count; ++i) {
    // Box–Muller: the same draw on every platform
    const double u1 = 1.0 - uniform();
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * uniform());
    const double x = median * std::exp(sigma * z);
    const auto clipped =
        static_cast<std::uint64_t>(std::clamp(x, static_cast<double>(shortest), static_cast<double>(longest)));
    out.push_back(std::max<std::uint64_t>(clipped / 8 * 8, std::min<std::uint64_t>(shortest, 8)));
  }
  return out;
}

std::vector<TrainingSchedule> planning_schedules(const JobSpec& spec) {
  const std::uint64_t ga = spec.training.grad_accum;
  std::vector<TrainingSchedule> out;
  if (spec.training.variable_length) {
    const std::uint64_t steps = std::max<std::uint64_t>(8, (kVariableLengthMicroSteps + ga - 1) / ga);
    for (std::uint64_t k = 0; k < kLengthDraws; ++k) {
      TrainingSchedule s;
      s.seq_lens = draw_lengths(spec, steps * ga, kLengthSeed + k);
      s.seq_lens.back() = spec.training.seq_len;
      out.push_back(std::move(s));
    }
  } else {
    TrainingSchedule s;
    s.seq_lens.assign(kFixedLengthOptimizerSteps * ga, spec.training.seq_len);
    out.push_back(std::move(s));
  }
  if (spec.eval) {
    for (auto& s : out) {
      const std::uint64_t steps = s.seq_lens.size() / ga;
      for (std::uint64_t k = 1; k <= steps; ++k)
        if (k % spec.eval->every == 0 || k == steps) s.eval_after.push_back(static_cast<std::uint32_t>(k * ga - 1));
    }
  }
  return out;
}

AllocationProgram build_training_program(const JobSpec& spec, const TrainingSchedule& schedule) {
  AllocationTape tape;
  tape.mark(Phase::kSetup, 0);
  LlamaProgram model(spec, tape);
  OptimizerProgram optimizer(spec, tape);
  model.construct();
  const auto tensors = model.optimized_tensors();
  const std::uint64_t ga = spec.training.grad_accum;
  std::size_t next_eval = 0;
  for (std::size_t k = 0; k < schedule.seq_lens.size(); ++k) {
    const auto index = static_cast<std::uint32_t>(k);
    model.train_micro_step(schedule.seq_lens[k], index);
    if ((k + 1) % ga == 0) {
      tape.mark(Phase::kOptimizerStep, index);
      optimizer.step(tensors);
      model.release_gradients();
    }
    if (next_eval < schedule.eval_after.size() && schedule.eval_after[next_eval] == index) {
      ++next_eval;
      model.eval_pass(spec.eval->micro_batch_size, spec.eval->seq_len);
    }
  }
  AllocationProgram program = tape.take();
  program.block_activation_bytes = model.block_activation_bytes();
  return program;
}

}  // namespace fragscope::plan

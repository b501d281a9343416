#pragma once
/// @brief Test helper: the fixtures' recorder workloads (truth.json "workload", meta.json "args")
/// as job specs, with what the recorder measured.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "inputs/oom_message_parser.h"
#include "plan/job_spec.h"
#include "plan/training_schedule.h"

namespace fragscope::plan::testing {

struct RecordedRun {
  std::string name;
  JobSpec spec;
  std::vector<std::uint64_t> seq_lens;  ///< per micro-step, from steps.jsonl
  std::uint64_t params = 0;             ///< sum(p.numel()) as the recorder printed it; 0 if absent
  std::uint64_t max_memory_allocated = 0;
  std::uint64_t max_memory_reserved = 0;
  std::string alloc_conf;               ///< PYTORCH_CUDA_ALLOC_CONF of the run
  TrainingSchedule schedule;            ///< the run's micro-steps (and the failing one) and evals
  std::uint64_t num_alloc_retries = 0;  ///< the run's own count, where truth.json has it
  bool oom = false;
  std::uint32_t oom_step = 0;
  std::string oom_phase;          ///< "train" or "eval"
  std::uint64_t oom_request = 0;  ///< "Tried to allocate" (two decimals)
  /// What this process could reserve: PyTorch's reserved bytes plus the driver's free bytes
  /// at the OOM (from the OOM message; exact to its two decimals).
  std::optional<std::uint64_t> capacity;
};

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

/// `dir` holds meta.json (tests/data/plan/*) or truth.json (../shared/fixtures/*) and steps.jsonl.
inline RecordedRun load_recorded_run(const std::filesystem::path& dir) {
  RecordedRun run;
  run.name = dir.filename().string();
  const bool truth = std::filesystem::exists(dir / "truth.json");
  const nlohmann::json doc = read_json(dir / (truth ? "truth.json" : "meta.json"));
  const nlohmann::json& w = truth ? doc.at("workload") : doc.at("args");
  run.params = doc.at("params").is_null() ? 0 : doc.at("params").get<std::uint64_t>();  // calib lacks it
  run.max_memory_allocated = doc.at("max_memory_allocated").get<std::uint64_t>();
  run.max_memory_reserved = doc.at("max_memory_reserved").get<std::uint64_t>();
  JobSpec& s = run.spec;
  s.source = run.name;
  s.model.hidden_size = w.at("hidden");
  s.model.num_layers = w.at("layers");
  s.model.num_attention_heads = w.at("heads");
  const std::uint64_t kv = w.value("kv_heads", 0);
  s.model.num_kv_heads = kv ? kv : s.model.num_attention_heads;
  s.model.intermediate_size = w.at("inter");
  s.model.vocab_size = w.at("vocab");
  s.training.micro_batch_size = w.at("mbs");
  s.training.grad_accum = w.at("ga");
  s.training.checkpointing = w.value("ckpt", false) ? Checkpointing::kFull : Checkpointing::kNone;
  s.training.attention = w.value("attn", std::string("sdpa")) == "eager" ? Attention::kEager : Attention::kSdpa;
  if (w.value("fsdp", false)) {  // one-rank FSDP2, MixedPrecisionPolicy(param_dtype=bf16), no autocast
    s.parallel.strategy = Strategy::kFsdp;
    s.training.precision = Precision::kMixedBf16;
  }
  // the levers' recorder (tests/data/plan/record_levers.py)
  const std::string precision = w.value("precision", std::string("amp-bf16"));
  if (precision == "bf16") s.training.precision = Precision::kBf16;
  if (precision == "fp32") s.training.precision = Precision::kFp32;
  const std::string optimizer = w.value("optimizer", std::string("adamw"));
  if (optimizer == "sgd") s.training.optimizer = Optimizer::kSgd;
  if (optimizer == "adamw-8bit") s.training.optimizer = Optimizer::kAdamW8bit;
  const std::string impl = w.value("optimizer_impl", std::string("foreach"));
  if (impl == "fused") s.training.optimizer_impl = OptimizerImpl::kFused;
  if (impl == "single-tensor") s.training.optimizer_impl = OptimizerImpl::kSingleTensor;
  if (w.value("loss", std::string("standard")) == "chunked") {
    s.training.loss = Loss::kChunked;
    s.training.loss_chunk_tokens = w.at("loss_chunk").get<std::uint64_t>();
  }
  if (const std::uint64_t k = w.value("ckpt_layers", 0); k && s.training.checkpointing == Checkpointing::kFull)
    s.training.checkpointed_layers = k;
  s.training.use_cache = !w.value("no_cache", false);
  s.hardware.gpu = "H200";
  std::ifstream steps(dir / "steps.jsonl");
  for (std::string line; std::getline(steps, line);)
    if (!line.empty()) run.seq_lens.push_back(nlohmann::json::parse(line).at("seq_len").get<std::uint64_t>());
  const std::uint64_t fixed = w.value("fixed_len", 0);
  s.training.variable_length = fixed == 0;
  s.training.seq_len = fixed ? fixed : w.at("max_len").get<std::uint64_t>();
  if (!fixed) {
    s.training.min_seq_len = w.at("min_len").get<std::uint64_t>();
    s.training.median_seq_len = 1097;  // the recorder's lognormvariate(7.0, 0.6): e^7
    s.training.length_sigma = 0.6;
  }

  const nlohmann::json meta = read_json(dir / "meta.json");
  run.alloc_conf = meta.value("alloc_conf", "");
  if (truth) run.num_alloc_retries = doc.value("num_alloc_retries", 0);
  std::vector<std::uint64_t> schedule_lens = run.seq_lens;
  const std::uint64_t eval_every = w.value("eval_every", 0);
  if (eval_every) {
    s.eval = EvalConfig{w.at("eval_batch").get<std::uint64_t>(), w.at("eval_len").get<std::uint64_t>(), 1};
    for (std::uint64_t k = 0; k <= run.seq_lens.size(); ++k)
      if ((k + 1) % eval_every == 0) run.schedule.eval_after.push_back(static_cast<std::uint32_t>(k));
  }
  if (meta.value("outcome", "") == "oom") {
    run.oom = true;
    run.oom_step = meta.at("oom_step").get<std::uint32_t>();
    run.oom_phase = meta.at("oom_phase").get<std::string>();
    if (run.seq_lens.size() == run.oom_step && meta.contains("oom_seq_len") && !meta["oom_seq_len"].is_null())
      schedule_lens.push_back(meta["oom_seq_len"].get<std::uint64_t>());
    if (const auto m = inputs::parse_oom_message(meta.at("oom_message").get<std::string>())) {
      run.oom_request = m->tried_to_allocate.value_or(0);
      if (m->reserved_by_pytorch && m->free) run.capacity = *m->reserved_by_pytorch + *m->free;
    }
  }
  run.schedule.lengths = MicroStepLengths::listed(std::move(schedule_lens));
  return run;
}

}  // namespace fragscope::plan::testing

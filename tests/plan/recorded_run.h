#pragma once
/// @brief Test helper: the fixtures' recorder workloads (truth.json "workload", meta.json "args")
/// as job specs, with what the recorder measured.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/job_spec.h"

namespace fragscope::plan::testing {

struct RecordedRun {
  std::string name;
  JobSpec spec;
  std::vector<std::uint64_t> seq_lens;  ///< per micro-step, from steps.jsonl
  std::uint64_t params = 0;             ///< sum(p.numel()) as the recorder printed it; 0 if absent
  std::uint64_t max_memory_allocated = 0;
  std::uint64_t max_memory_reserved = 0;
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
  if (w.value("fsdp", false)) s.parallel.strategy = Strategy::kFsdp;  // one-rank FSDP2
  s.hardware.gpu = "H200";
  std::ifstream steps(dir / "steps.jsonl");
  for (std::string line; std::getline(steps, line);)
    if (!line.empty()) run.seq_lens.push_back(nlohmann::json::parse(line).at("seq_len").get<std::uint64_t>());
  const std::uint64_t fixed = w.value("fixed_len", 0);
  s.training.variable_length = fixed == 0;
  s.training.seq_len = fixed ? fixed : w.at("max_len").get<std::uint64_t>();
  return run;
}

}  // namespace fragscope::plan::testing

#include "report/plan_report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report/json_header.h"
#include "util/bytes.h"

namespace fragscope::report {

using plan::CanaryPlan;
using plan::Checkpointing;
using plan::JobSpec;
using plan::MemoryEstimate;
using plan::ModelShape;
using plan::Proposal;
using plan::ProposalSet;
using plan::Strategy;
using plan::TrainingConfig;

namespace {

std::string describe(std::string_view key, const JobSpec& spec, const MemoryEstimate& e) {
  const ModelShape& m = spec.model;
  const std::uint64_t tokens = spec.training.micro_batch_size * spec.training.seq_len;
  const std::uint64_t n = spec.parallel.world_size;
  const std::string shard = n > 1 && spec.parallel.strategy != Strategy::kNone && spec.parallel.strategy != Strategy::kDdp
                                ? fmt::format(", sharded 1/{}", n)
                                : "";
  if (key == "parameters") return fmt::format("{:.2f} B parameters{}", m.parameters() / 1e9, shard);
  if (key == "gradients") return "kept between micro-steps (grad_accum > 1)" + shard;
  if (key == "optimizer_state") return fmt::format("{} state{}", to_string(spec.training.optimizer), shard);
  if (key == "optimizer_temporaries") return "foreach update's sqrt(exp_avg_sq) buffers";
  if (key == "weight_copies") return "autocast's bf16 copies of every matrix, forward to backward";
  if (key == "activations")
    return fmt::format("{} blocks × {} per block (mbs {} × {} tokens){}", m.num_layers,
                       format_bytes(e.activations_per_layer_bytes), spec.training.micro_batch_size,
                       spec.training.seq_len,
                       spec.training.checkpointing == Checkpointing::kFull ? "; checkpointed: block inputs + one block"
                                                                           : "");
  if (key == "kv_cache") return "HF DynamicCache built while training (use_cache)";
  if (key == "logits_and_loss")
    return fmt::format("{} tokens × vocab {}: logits, fp32 upcast, log_softmax", tokens, m.vocab_size);
  if (key == "backward_transients") return "gradient buffers inside a block's backward";
  if (key == "ddp_buckets") return "DDP's flat gradient buckets";
  if (key == "sharding_buffers") return "gathered parameters (root / current block) and reduce-scatter buffers";
  if (key == "cublas_workspace") return "2 × 32 MiB cuBLAS workspaces";
  return "";
}

void row(std::ostream& out, std::string_view label, std::uint64_t bytes, std::string_view note) {
  out << fmt::format("  {:<24}{:>12}  {}\n", label, format_bytes(bytes), note);
}

std::string verdict(const MemoryEstimate& e) {
  if (e.fits) return fmt::format("FITS with {} to spare", format_bytes(static_cast<std::uint64_t>(e.margin_bytes)));
  return fmt::format("DOES NOT FIT: short by {}", format_bytes(static_cast<std::uint64_t>(-e.margin_bytes)));
}

std::string device_name(const JobSpec& spec) {
  return spec.hardware.mig.empty() ? spec.hardware.gpu : fmt::format("{} MIG {}", spec.hardware.gpu, spec.hardware.mig);
}

nlohmann::ordered_json estimate_json(const MemoryEstimate& e) {
  nlohmann::ordered_json j;
  j["peak_allocated_bytes"] = e.peak_allocated_bytes;
  j["peak_reserved_bytes"] = e.peak_reserved_bytes;
  j["device_bytes"] = e.device_bytes;
  j["usable_bytes"] = e.usable_bytes;
  j["fits"] = e.fits;
  j["within_hbm_limit"] = e.within_hbm_limit;
  j["margin_bytes"] = e.margin_bytes;
  j["peak_phase"] = e.peak.phase;
  j["headroom_fraction"] = e.headroom_fraction;
  j["activations_per_layer_bytes"] = e.activations_per_layer_bytes;
  nlohmann::ordered_json breakdown = nlohmann::ordered_json::object();
  for (const auto& item : e.peak.items) breakdown[std::string(item.key)] = item.bytes;
  breakdown["cuda_context"] = e.cuda_context_bytes;
  breakdown["communication_buffers"] = e.communication_bytes;
  j["breakdown"] = breakdown;
  return j;
}

}  // namespace

void write_plan_text(std::ostream& out, const JobSpec& spec, const MemoryEstimate& e, const ProposalSet* proposals,
                     const CanaryPlan* canary) {
  const ModelShape& m = spec.model;
  const TrainingConfig& t = spec.training;
  out << fmt::format("fragscope plan: {}\n", spec.source);
  out << fmt::format("job     {:.2f} B parameters ({}hidden {}, {} layers, {}/{} heads, mlp {}, vocab {}{})\n",
                     m.parameters() / 1e9, m.preset.empty() ? "" : m.preset + ": ", m.hidden_size, m.num_layers,
                     m.num_attention_heads, m.num_kv_heads, m.intermediate_size, m.vocab_size,
                     m.tied_embeddings ? ", tied" : "");
  out << fmt::format("        {}, {}, seq {} × micro-batch {}{}, grad_accum {}, checkpointing {}, {} attention\n",
                     to_string(t.precision), to_string(t.optimizer), t.seq_len, t.micro_batch_size,
                     t.variable_length ? " (variable lengths)" : "", t.grad_accum, to_string(t.checkpointing),
                     to_string(t.attention));
  out << fmt::format("        {} over {} × {}; global batch {} sequences{}\n", to_string(spec.parallel.strategy),
                     spec.parallel.world_size, device_name(spec), spec.global_batch(),
                     t.global_batch ? fmt::format(" (target {})", *t.global_batch) : "");
  out << fmt::format("per GPU at the peak, {}:\n", e.peak.phase);
  for (const auto& item : e.peak.items) row(out, item.key, item.bytes, describe(item.key, spec, e));
  row(out, "= peak allocated", e.peak_allocated_bytes, "torch.cuda.max_memory_allocated()");
  row(out, "= peak reserved", e.peak_reserved_bytes,
      fmt::format("+{:.0f}% caching-allocator headroom{}", e.headroom_fraction * 100,
                  spec.hardware.expandable_segments ? " (expandable_segments)"
                  : t.variable_length             ? " (variable lengths)"
                                                  : ""));
  row(out, "+ CUDA context", e.cuda_context_bytes, "driver reserve + CUDA context, outside PyTorch");
  if (e.communication_bytes) row(out, "+ NCCL buffers", e.communication_bytes, "communicator buffers, outside PyTorch");
  row(out, "device", e.device_bytes, fmt::format("{} memory.total; usable by PyTorch {}", device_name(spec),
                                                 format_bytes(e.usable_bytes)));
  out << fmt::format("verdict: {} ({:.1f}% of the device in use at the peak)\n", verdict(e),
                     100.0 * static_cast<double>(e.peak_reserved_bytes + e.cuda_context_bytes + e.communication_bytes) /
                         static_cast<double>(e.device_bytes));
  if (proposals) {
    out << fmt::format("\nproposals (global batch {}{}):\n", proposals->current_global_batch,
                       proposals->target_global_batch ? fmt::format(", target {}", *proposals->target_global_batch) : "");
    out << fmt::format("  {:<46}{:>14} {:>5}  {:<7}{:>8}  {}\n", "PROPOSAL", "PEAK RESERVED", "HBM", "FITS", "TOKENS/S",
                       "COST / NOTE");
    for (std::size_t i = 0; i < proposals->proposals.size(); ++i) {
      const Proposal& p = proposals->proposals[i];
      const std::string fits = !p.workable                  ? "cannot"
                               : p.estimate.within_hbm_limit ? "yes"
                               : p.estimate.fits             ? "> 90%"
                                                             : "no";
      const std::string mark = proposals->recommended == i ? "*" : " ";
      const double hbm = static_cast<double>(p.estimate.peak_reserved_bytes) / static_cast<double>(p.estimate.device_bytes);
      out << fmt::format("{} {:<46}{:>14} {:>4.0f}%  {:<7}{:>7.0f}%  {}{}\n", mark, p.name,
                         format_bytes(p.estimate.peak_reserved_bytes), hbm * 100, fits, p.throughput_factor * 100,
                         p.cost, p.problem.empty() ? "" : "; " + p.problem);
    }
    out << "recommendation: " << proposals->recommendation << '\n';
  }
  if (canary) {
    out << fmt::format("\ncanary plan ({} micro-steps per run):\n", canary->micro_steps);
    for (std::size_t i = 0; i < canary->steps.size(); ++i)
      out << fmt::format("  {}. {}: {}\n", i + 1, canary->steps[i].title, canary->steps[i].detail);
    out << "acceptance criteria:\n";
    inputs::write_acceptance_criteria(out, canary->criteria);
  }
}

void write_plan_json(std::ostream& out, const JobSpec& spec, const MemoryEstimate& e, const ProposalSet* proposals,
                     const CanaryPlan* canary) {
  nlohmann::ordered_json j;
  add_json_header(j, kPlanJsonSchema);
  nlohmann::ordered_json estimate = estimate_json(e);
  for (auto& [key, value] : estimate.items()) j[key] = std::move(value);
  nlohmann::ordered_json phases = nlohmann::ordered_json::array();
  for (const auto& p : e.phases) phases.push_back({{"phase", p.phase}, {"bytes", p.bytes}});
  j["phases"] = phases;
  j["job"] = {{"source", spec.source},
              {"parameters", spec.model.parameters()},
              {"gpu", spec.hardware.gpu},
              {"mig", spec.hardware.mig},
              {"strategy", to_string(spec.parallel.strategy)},
              {"world_size", spec.parallel.world_size},
              {"precision", to_string(spec.training.precision)},
              {"checkpointing", to_string(spec.training.checkpointing)},
              {"micro_batch_size", spec.training.micro_batch_size},
              {"grad_accum", spec.training.grad_accum},
              {"seq_len", spec.training.seq_len},
              {"global_batch", spec.global_batch()}};
  if (proposals) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& p : proposals->proposals) {
      nlohmann::ordered_json item = {{"name", p.name},
                                     {"change", p.change},
                                     {"workable", p.workable},
                                     {"fits", p.estimate.fits},
                                     {"within_hbm_limit", p.estimate.within_hbm_limit},
                                     {"throughput_factor", p.throughput_factor}, {"cost", p.cost},
                                     {"problem", p.problem}};
      item["estimate"] = estimate_json(p.estimate);
      list.push_back(item);
    }
    j["proposals"] = {{"current_global_batch", proposals->current_global_batch},
                      {"target_global_batch", proposals->target_global_batch.value_or(proposals->current_global_batch)},
                      {"items", list},
                      {"recommended", proposals->recommended ? nlohmann::ordered_json(*proposals->recommended)
                                                             : nlohmann::ordered_json(nullptr)},
                      {"recommendation", proposals->recommendation}};
  }
  if (canary) {
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const auto& s : canary->steps) steps.push_back({{"title", s.title}, {"detail", s.detail}});
    j["canary"] = {{"micro_steps", canary->micro_steps},
                   {"predicted_hbm_fraction", canary->predicted_hbm_fraction},
                   {"steps", steps},
                   {"criteria", inputs::acceptance_criteria_json(canary->criteria)}};
  }
  out << j.dump(2) << '\n';
}

}  // namespace fragscope::report

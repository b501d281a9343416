#include "report/plan_report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "alloc/alloc_config.h"
#include "report/json_header.h"
#include "util/bytes.h"
#include "util/shown_text.h"

namespace fragscope::report {

using plan::CanaryPlan;
using plan::Checkpointing;
using plan::JobPlan;
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
  const TrainingConfig& t = spec.training;
  const std::uint64_t n = spec.parallel.world_size;
  const bool sharded = n > 1 && spec.parallel.strategy != Strategy::kNone && spec.parallel.strategy != Strategy::kDdp;
  const std::string shard = sharded ? fmt::format(", sharded 1/{}", n) : "";
  if (key == "parameters")
    return fmt::format("{:.2f} B parameters{}", static_cast<double>(m.parameters()) / 1e9, shard);
  if (key == "gradients") return "the .grad tensors" + shard + (t.grad_accum > 1 ? ", kept between micro-steps" : "");
  if (key == "optimizer_state") return fmt::format("{} state{}", to_string(t.optimizer), shard);
  if (key == "optimizer_temporaries") return fmt::format("the {} update's temporaries", to_string(t.optimizer_impl));
  if (key == "weight_copies")
    return spec.parallel.strategy == Strategy::kFsdp ? "FSDP's gathered parameters (and autocast's casts)"
                                                     : "autocast's bf16 casts of the weights, forward to backward";
  if (key == "activations")
    return fmt::format("what {} blocks keep for the backward ({} per block at {} × {} tokens){}", m.num_layers,
                       format_bytes(e.block_activation_bytes), t.micro_batch_size, e.longest_seq_len,
                       t.checkpointing == Checkpointing::kFull ? "; checkpointed blocks keep their input" : "");
  if (key == "kv_cache") return "HF DynamicCache built while training (use_cache)";
  if (key == "logits_and_loss")
    return fmt::format("logits over vocab {}, their fp32 copy, log_softmax, gradients", m.vocab_size);
  if (key == "transients") return "intermediates of the op or backward node running at the peak";
  if (key == "communication_buffers") return "DDP buckets, FSDP reduce-scatter and all-gather buffers";
  if (key == "cublas_workspace") return "2 × 32 MiB cuBLAS workspaces (forward and autograd threads)";
  if (key == "batch") return "input ids, labels, positions, rotary tables";
  if (key == "allocator_rounding") return "blocks rounded up to 512 B and unsplit remainders";
  return "";
}

void row(std::ostream& out, std::string_view label, std::uint64_t bytes, std::string_view note) {
  out << fmt::format("  {:<24}{:>12}  {}\n", label, format_bytes(bytes), note);
}

std::string device_name(const JobSpec& spec) {
  return spec.hardware.mig.empty() ? spec.hardware.gpu : fmt::format("{} MIG {}", spec.hardware.gpu, spec.hardware.mig);
}

std::string status(const Proposal& p) {
  if (!p.workable) return "cannot";
  if (p.estimate.within_hbm_limit) return "within";
  if (!p.estimate.fits) return "no";
  if (p.estimate.cache_trimmed) return "trims";
  return "> limit";
}

nlohmann::ordered_json moment_json(const plan::ProgramMoment& m) {
  return {{"phase", plan::program_phase_name(m.phase)}, {"micro_step", m.micro_step + 1}};
}

nlohmann::ordered_json estimate_json(const MemoryEstimate& e) {
  nlohmann::ordered_json j;
  j["peak_allocated_bytes"] = e.peak_allocated_bytes;
  j["peak_reserved_bytes"] = e.peak_reserved_bytes;
  j["unconstrained_reserved_bytes"] = e.unconstrained_reserved_bytes;
  j["hbm_fraction"] = e.hbm_fraction();
  j["max_hbm_fraction"] = plan::kMaxHbmFraction;
  j["device_bytes"] = e.device_bytes;
  j["usable_bytes"] = e.usable_bytes;
  j["fits"] = e.fits;
  j["within_hbm_limit"] = e.within_hbm_limit;
  j["num_alloc_retries"] = e.num_alloc_retries;
  j["cache_trimmed"] = e.cache_trimmed;
  j["margin_bytes"] = e.margin_bytes;
  j["peak_allocated_at"] = moment_json(e.peak_allocated_at);
  j["peak_reserved_at"] = moment_json(e.peak_reserved_at);
  j["unallocated_at_peak_bytes"] = e.unallocated_at_peak_bytes;
  if (!e.fits) j["out_of_memory"] = {{"at", moment_json(e.oom_at)}, {"request_bytes", e.oom_request_bytes}};
  j["block_activation_bytes"] = e.block_activation_bytes;
  j["replayed"] = {{"micro_steps", e.micro_steps}, {"optimizer_steps", e.optimizer_steps},
                   {"eval_passes", e.eval_passes}, {"longest_seq_len", e.longest_seq_len},
                   {"length_draws", e.draws},      {"lowest_draw_peak_reserved_bytes", e.lowest_draw_reserved_bytes}};
  nlohmann::ordered_json breakdown = nlohmann::ordered_json::object();
  for (const auto& item : e.breakdown) breakdown[std::string(item.key)] = item.bytes;
  breakdown["cuda_context"] = e.cuda_context_bytes;
  breakdown["nccl_buffers"] = e.communication_bytes;
  j["breakdown"] = breakdown;
  return j;
}

void write_largest(std::ostream& out, const plan::LargestFit& fit, const JobSpec& spec) {
  out << fmt::format("\nlargest that fit within the canary's {}:\n", plan::percent_text(plan::kMaxHbmFraction));
  if (fit.micro_batch_size)
    out << fmt::format("  micro_batch_size {:<6} at seq_len {}: peak reserved {} ({})\n", *fit.micro_batch_size,
                       spec.training.seq_len, format_bytes(fit.at_micro_batch->peak_reserved_bytes),
                       plan::percent_text(fit.at_micro_batch->hbm_fraction()));
  else
    out << fmt::format("  no micro-batch fits at seq_len {}\n", spec.training.seq_len);
  if (fit.seq_len)
    out << fmt::format("  seq_len {:<14} at micro_batch_size {}: peak reserved {} ({})\n", *fit.seq_len,
                       spec.training.micro_batch_size, format_bytes(fit.at_seq_len->peak_reserved_bytes),
                       plan::percent_text(fit.at_seq_len->hbm_fraction()));
  else
    out << fmt::format("  no seq_len fits at micro_batch_size {}\n", spec.training.micro_batch_size);
}

}  // namespace

void write_plan_text(std::ostream& out, const JobSpec& spec, const JobPlan& jp) {
  const MemoryEstimate& e = jp.estimate;
  const ModelShape& m = spec.model;
  const TrainingConfig& t = spec.training;
  out << fmt::format("fragscope plan: {}\n", shown_name(spec.source, kShownPathBytes));
  out << fmt::format("job      {:.2f} B parameters ({}hidden {}, {} layers, {}/{} heads, mlp {}, vocab {}{})\n",
                     static_cast<double>(m.parameters()) / 1e9, m.preset.empty() ? "" : m.preset + ": ", m.hidden_size,
                     m.num_layers, m.num_attention_heads, m.num_kv_heads, m.intermediate_size, m.vocab_size,
                     m.tied_embeddings ? ", tied" : "");
  out << fmt::format(
      "         {}, {} ({}), seq {} × micro-batch {}{}, grad_accum {}, checkpointing {}, {} attention, "
      "{} loss\n",
      to_string(t.precision), to_string(t.optimizer), to_string(t.optimizer_impl), t.seq_len, t.micro_batch_size,
      t.variable_length ? " (variable lengths)" : "", t.grad_accum, to_string(t.checkpointing), to_string(t.attention),
      to_string(t.loss));
  out << fmt::format("         {} over {} × {}; global batch {} sequences\n", to_string(spec.parallel.strategy),
                     spec.parallel.world_size, device_name(spec), spec.global_batch());
  for (std::size_t i = 0; i < jp.assumptions.size(); ++i) {
    const auto& a = jp.assumptions[i];
    out << fmt::format("{:<9}{} = {}: {}\n", i == 0 ? "assumes" : "", a.key, a.value, a.meaning);
  }
  std::string left;
  for (const auto& l : plan::left_out()) left += (left.empty() ? "" : "; ") + l;
  out << fmt::format("left out {}\n", left);
  for (const auto& w : jp.warnings) out << "warning  " << w << '\n';
  out << fmt::format("per GPU at the allocated peak ({}):\n", plan::moment_text(e.peak_allocated_at));
  for (const auto& item : e.breakdown) row(out, item.key, item.bytes, describe(item.key, spec, e));
  row(out, "= peak allocated", e.peak_allocated_bytes, "torch.cuda.max_memory_allocated()");
  const std::string draws = e.draws > 1 ? fmt::format("the highest of {} length draws (the lowest {}), ", e.draws,
                                                      format_bytes(e.lowest_draw_reserved_bytes))
                                        : "";
  row(out, "= peak reserved", e.peak_reserved_bytes,
      fmt::format("torch.cuda.max_memory_reserved(): the caching allocator replayed over {} micro-steps, {}at its "
                  "peak ({}) {} cached but unallocated",
                  e.micro_steps, draws, plan::moment_text(e.peak_reserved_at),
                  format_bytes(e.unallocated_at_peak_bytes)));
  row(out, "+ CUDA context", e.cuda_context_bytes, "driver reserve + CUDA context, outside PyTorch");
  if (e.communication_bytes)
    row(out, "+ NCCL buffers", e.communication_bytes, "communicator buffers, outside PyTorch (estimate)");
  row(out, "device", e.device_bytes,
      fmt::format("{} memory.total; usable by PyTorch {}", device_name(spec), format_bytes(e.usable_bytes)));
  out << "verdict: " << jp.verdict << '\n';

  if (jp.proposals) {
    const ProposalSet& ps = *jp.proposals;
    out << fmt::format(
        "\nproposals (global batch {}{}; throughput factors are estimates, docs/plan.md):\n", ps.current_global_batch,
        ps.target_global_batch != ps.current_global_batch ? fmt::format(", target {}", ps.target_global_batch) : "");
    out << fmt::format("  {:<46}{:>14} {:>6}  {:<8}{:>8}  {:<9}{}\n", "PROPOSAL", "PEAK RESERVED", "HBM", "STATUS",
                       "TOKENS/S", "MEMORY", "COST / NOTE");
    for (std::size_t i = 0; i < ps.proposals.size(); ++i) {
      const Proposal& p = ps.proposals[i];
      const std::string mark = ps.recommended == i ? "*" : " ";
      out << fmt::format("{} {:<46}{:>14} {:>6}  {:<8}{:>7.1f}%  {:<9}{}{}\n", mark, p.name,
                         format_bytes(p.estimate.peak_reserved_bytes), plan::percent_text(p.estimate.hbm_fraction()),
                         status(p), p.throughput_factor * 100, p.memory_basis, p.cost,
                         p.problem.empty() ? "" : "; " + p.problem);
    }
    out << "recommendation: " << ps.recommendation << '\n';
  }
  if (jp.largest) write_largest(out, *jp.largest, spec);
  if (jp.canary) {
    const CanaryPlan& c = *jp.canary;
    out << fmt::format("\ncanary plan ({} micro-steps = {} optimizer steps per run{}):\n", c.micro_steps,
                       c.optimizer_steps, c.change.empty() ? "" : ", for the recommended change");
    for (std::size_t i = 0; i < c.steps.size(); ++i)
      out << fmt::format("  {}. {}: {}\n", i + 1, c.steps[i].title, c.steps[i].detail);
    out << fmt::format(
        "predicted: peak reserved {} ({} of HBM, ±{:.0f}%); step-time spread from the lengths alone "
        "{:.1f}%, samples/s spread {:.1f}%\n",
        format_bytes(c.predicted_peak_reserved_bytes), plan::percent_text(c.predicted_hbm_fraction),
        c.peak_reserved_tolerance * 100, c.predicted_step_time_spread * 100, c.predicted_throughput_spread * 100);
    out << "acceptance criteria:\n";
    inputs::write_acceptance_criteria(out, c.criteria);
  } else if (jp.exit_status != 0 && jp.proposals && !jp.proposals->recommended) {
    out << "canary plan: none; no configuration is within the limits, so there is nothing to validate\n";
  }
}

nlohmann::ordered_json plan_json(const JobSpec& spec, const JobPlan& jp) {
  nlohmann::ordered_json j;
  add_json_header(j, kPlanJsonSchema);
  nlohmann::ordered_json estimate = estimate_json(jp.estimate);  // a named value: items() refers into it
  for (auto& [key, value] : estimate.items()) j[key] = std::move(value);
  j["verdict"] = jp.verdict;
  j["exit_status"] = jp.exit_status;
  nlohmann::ordered_json assumed = nlohmann::ordered_json::array();
  for (const auto& a : jp.assumptions) assumed.push_back({{"key", a.key}, {"value", a.value}, {"meaning", a.meaning}});
  j["assumptions"] = assumed;
  j["left_out"] = plan::left_out();
  j["warnings"] = jp.warnings;
  j["job"] = {{"source", spec.source},
              {"parameters", spec.model.parameters()},
              {"gpu", spec.hardware.gpu},
              {"mig", spec.hardware.mig},
              {"alloc_conf", alloc::to_alloc_conf(spec.hardware.alloc_config)},
              {"strategy", to_string(spec.parallel.strategy)},
              {"world_size", spec.parallel.world_size},
              {"precision", to_string(spec.training.precision)},
              {"optimizer", to_string(spec.training.optimizer)},
              {"optimizer_impl", to_string(spec.training.optimizer_impl)},
              {"checkpointing", to_string(spec.training.checkpointing)},
              {"attention", to_string(spec.training.attention)},
              {"loss", to_string(spec.training.loss)},
              {"micro_batch_size", spec.training.micro_batch_size},
              {"grad_accum", spec.training.grad_accum},
              {"seq_len", spec.training.seq_len},
              {"variable_length", spec.training.variable_length},
              {"global_batch", spec.global_batch()}};
  if (jp.proposals) {
    const ProposalSet& ps = *jp.proposals;
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& p : ps.proposals) {
      nlohmann::ordered_json item = {{"name", p.name},
                                     {"change", p.change},
                                     {"overrides", p.overrides},
                                     {"workable", p.workable},
                                     {"more_hardware", p.more_hardware},
                                     {"changes_numerics", p.changes_numerics},
                                     {"status", status(p)},
                                     {"throughput_factor", p.throughput_factor},
                                     {"throughput_is_estimate", true},
                                     {"memory_basis", p.memory_basis},
                                     {"cost", p.cost},
                                     {"problem", p.problem}};
      item["estimate"] = estimate_json(p.estimate);
      list.push_back(item);
    }
    j["proposals"] = {
        {"current_global_batch", ps.current_global_batch},
        {"target_global_batch", ps.target_global_batch},
        {"items", list},
        {"recommended", ps.recommended ? nlohmann::ordered_json(*ps.recommended) : nlohmann::ordered_json()},
        {"recommendation", ps.recommendation}};
  }
  if (jp.largest) {
    const auto& f = *jp.largest;
    auto at = [](const std::optional<MemoryEstimate>& e) {
      return e ? nlohmann::ordered_json{{"peak_reserved_bytes", e->peak_reserved_bytes},
                                        {"hbm_fraction", e->hbm_fraction()}}
               : nlohmann::ordered_json();
    };
    j["largest_fit"] = {{"micro_batch_size",
                         f.micro_batch_size ? nlohmann::ordered_json(*f.micro_batch_size) : nlohmann::ordered_json()},
                        {"at_micro_batch_size", at(f.at_micro_batch)},
                        {"seq_len", f.seq_len ? nlohmann::ordered_json(*f.seq_len) : nlohmann::ordered_json()},
                        {"at_seq_len", at(f.at_seq_len)}};
  }
  if (jp.canary) {
    const CanaryPlan& c = *jp.canary;
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const auto& s : c.steps) steps.push_back({{"title", s.title}, {"detail", s.detail}});
    j["canary"] = {{"change", c.change},
                   {"micro_steps", c.micro_steps},
                   {"optimizer_steps", c.optimizer_steps},
                   {"predicted_peak_reserved_bytes", c.predicted_peak_reserved_bytes},
                   {"predicted_hbm_fraction", c.predicted_hbm_fraction},
                   {"peak_reserved_tolerance", c.peak_reserved_tolerance},
                   {"predicted_step_time_spread", c.predicted_step_time_spread},
                   {"predicted_throughput_spread", c.predicted_throughput_spread},
                   {"steps", steps},
                   {"criteria", inputs::acceptance_criteria_json(c.criteria)}};
  }
  return j;
}

}  // namespace fragscope::report

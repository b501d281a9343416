#include "report/doctor_report.h"

namespace fragscope::report {
namespace {

using nlohmann::json;

template <typename T>
json optional_json(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

json action_json(const diagnose::Action& a) {
  return {{"title", a.title}, {"setting", a.setting}, {"evidence", a.evidence}, {"sufficient", a.sufficient}};
}

json projection_json(const diagnose::StepProjection& p) {
  if (!p.available) return {{"available", false}, {"reason", p.unavailable_reason}};
  return {{"available", true},
          {"failing_step", optional_json(p.failing_step)},
          {"failing_tokens", optional_json(p.failing_tokens)},
          {"reference_step", optional_json(p.reference_step)},
          {"reference_tokens", optional_json(p.reference_tokens)},
          {"token_ratio", p.token_ratio},
          {"static_bytes", p.static_bytes},
          {"reference_peak_bytes", p.reference_peak_bytes},
          {"reference_activation_bytes", p.reference_transient_bytes},
          {"reference_constant_bytes", p.reference_constant_bytes},
          {"activation_bytes_per_token", optional_json(p.activation_bytes_per_token)},
          {"live_at_oom_bytes", p.live_at_oom_bytes},
          {"projected_peak_bytes", p.projected_peak_bytes},
          {"returning_bytes", p.returning_bytes},
          {"next_step_peak_bytes", p.next_step_peak_bytes}};
}

json oom_json(const std::optional<diagnose::OomContext>& c) {
  if (!c) return nullptr;
  return {{"request_bytes", c->request_bytes},
          {"driver_free_bytes", optional_json(c->driver_free_bytes)},
          {"reserved_bytes", optional_json(c->reserved_bytes)},
          {"allocated_bytes", optional_json(c->allocated_bytes)},
          {"reserved_unallocated_bytes", optional_json(c->reserved_unallocated)},
          {"largest_free_block_bytes", optional_json(c->largest_free_block)},
          {"smi_used_bytes", optional_json(c->smi_used_bytes)},
          {"smi_total_bytes", optional_json(c->smi_total_bytes)},
          {"trace_index", optional_json(c->trace_index)},
          {"rank", optional_json(c->rank)}};
}

}  // namespace

json doctor_json(const diagnose::Diagnosis& d) {
  json evidence = json::array();
  for (const auto& e : d.evidence) evidence.push_back({{"key", e.key}, {"text", e.text}});
  json actions = json::array();
  for (const auto& a : d.actions) actions.push_back(action_json(a));
  json do_not = json::array();
  for (const auto& a : d.do_not) do_not.push_back(action_json(a));
  json whatif = json::array();
  for (const auto& w : d.whatif)
    whatif.push_back({{"conf", w.conf}, {"recorded", w.recorded}, {"peak_reserved_bytes", w.peak_reserved_bytes},
                      {"passes_oom_point", optional_json(w.passes_oom_point)}, {"fits", optional_json(w.fits)}});
  json skipped = json::array();
  for (const auto& [path, reason] : d.skipped_inputs) skipped.push_back({{"path", path}, {"reason", reason}});
  json ranks = json::array();
  for (const auto& r : d.ranks)
    ranks.push_back({{"rank", r.rank}, {"oom", r.oom}, {"peak_reserved_bytes", optional_json(r.peak_reserved_bytes)},
                     {"peak_allocated_bytes", optional_json(r.peak_allocated_bytes)},
                     {"data_wait_fraction", optional_json(r.data_wait_fraction)}, {"sources", r.sources}});
  return {{"verdict", std::string(diagnose::to_string(d.verdict))},
          {"headline", d.headline},
          {"phase", d.phase},
          {"phase_source", d.phase_source},
          {"trigger", d.trigger},
          {"data_wait_fraction", optional_json(d.data_wait_fraction)},
          {"steady_data_wait_fraction", optional_json(d.steady_data_wait_fraction)},
          {"gpu_idle_fraction", optional_json(d.gpu_idle_fraction)},
          {"evidence", evidence},
          {"actions", actions},
          {"do_not", do_not},
          {"decide_with", d.decide_with},
          {"healthy", d.healthy},
          {"oom", oom_json(d.oom_context)},
          {"capacity_bytes", optional_json(d.capacity_bytes)},
          {"capacity_source", d.capacity_source},
          {"projection", projection_json(d.projection)},
          {"whatif", whatif},
          {"recommended_alloc_conf", d.recommended_conf.empty() ? json(nullptr) : json(d.recommended_conf)},
          {"ideal_peak_bytes", optional_json(d.ideal_peak_bytes)},
          {"ranks", ranks},
          {"worst_rank", optional_json(d.worst_rank)},
          {"rank_spread", d.rank_spread},
          {"inputs_used", d.inputs_used},
          {"skipped_inputs", skipped},
          {"inputs_missing", d.inputs_missing}};
}

}  // namespace fragscope::report

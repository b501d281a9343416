#include "report/doctor_report.h"

#include "report/json_header.h"
#include "report/segment_lot.h"

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

json trace_projection_json(const diagnose::TraceStepProjection& p) {
  if (!p.available) return {{"available", false}, {"reason", p.unavailable_reason}};
  json runs = json::array();
  for (const auto& r : p.runs)
    runs.push_back({{"conf", r.conf},
                    {"recorded", r.recorded},
                    {"runs", r.runs},
                    {"runs_with_margin", r.runs_with_margin},
                    {"fails_with_margin", r.fails_with_margin},
                    {"runs_above_capacity", r.runs_above_capacity},
                    {"relaid_start", r.relaid_start},
                    {"peak_reserved_bytes", r.runs ? json(r.peak_reserved_bytes) : json(nullptr)}});
  return {{"available", true},
          {"unit_statement", p.unit_statement},
          {"eval_units", p.eval_units},
          {"from_training_call", p.from_training_call},
          {"training_call", p.training_call},
          {"shared_function", p.shared_function},
          {"most_peak_bytes", p.most_peak_bytes},
          {"least_peak_bytes", p.least_peak_bytes},
          {"learned_lifetimes", p.learned_lifetimes},
          {"earlier_units", p.earlier_units},
          {"reference_unit", p.reference_unit},
          {"reference_first_event", p.reference_first_event},
          {"reference_end_event", p.reference_end_event},
          {"aligned_event", p.aligned_event},
          {"prefix_allocations", p.prefix_allocations},
          {"matched_allocations", p.matched_allocations},
          {"scale", p.scale},
          {"aligned_units", p.aligned_units},
          {"smaller_units", p.smaller_units},
          {"varying_units", p.varying_units},
          {"off_scale_share", p.off_scale_share},
          {"reference_off_scale_share", p.reference_off_scale_share},
          {"reference_unmatched_bytes", p.reference_unmatched_bytes},
          {"reference_is_first_step", p.reference_is_first_step},
          {"first_step_unlike", p.first_step_unlike},
          {"follows_one_scale", p.follows_one_scale},
          {"longest_unit", optional_json(p.longest_unit)},
          {"longest_peak_bytes", p.longest_peak_bytes},
          {"growing_units", p.growing_units},
          {"last_growth", p.last_growth},
          {"constant_bytes", p.constant_bytes},
          {"linear_bytes", p.linear_bytes},
          {"quadratic_bytes", p.quadratic_bytes},
          {"other_bytes", p.other_bytes},
          {"unfitted_bytes", p.unfitted_bytes},
          {"unmatched_free_bytes", p.unmatched_free_bytes},
          {"kind_difference_bytes", p.kind_difference_bytes},
          {"reference_began_lower", p.reference_began_lower},
          {"kept_before_peak_bytes", p.kept_before_peak_bytes},
          {"held_freeable_bytes", p.held_freeable_bytes},
          {"held_freed_saving_bytes", p.held_freed_saving_bytes},
          {"checked_units", p.checked_units},
          {"other_kind_units", p.other_kind_units},
          {"fit_error", optional_json(p.fit_error)},
          {"fit_error_below", p.fit_error_below},
          {"fit_error_above", p.fit_error_above},
          {"prefix_misfit_share", p.prefix_misfit_share},
          {"over_bytes", p.over_bytes},
          {"under_bytes", p.under_bytes},
          {"fit_margin", p.fit_margin},
          {"margin_to_fit", p.margin_to_fit},
          {"margin_to_fail", p.margin_to_fail},
          {"start_level_bytes", p.start_level_bytes},
          {"head_bytes", p.head_bytes},
          {"reference_head_bytes", p.reference_head_bytes},
          {"live_at_oom_bytes", p.live_at_oom_bytes},
          {"projected_peak_bytes", p.projected_peak_bytes},
          {"inelastic_peak_bytes", p.inelastic_peak_bytes},
          {"next_unit_extra_bytes", p.next_unit_extra_bytes},
          {"runs", runs}};
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

json segment_map_json(const diagnose::Diagnosis& d) {
  if (d.segment_map.empty()) return nullptr;
  const SegmentTotals t = segment_totals(d.segment_map);
  return {{"at_oom", d.segment_map_at_oom},
          {"segments", t.segments},
          {"reserved_bytes", t.reserved_bytes},
          {"free_bytes", t.free_bytes},
          {"pending_free_bytes", t.pending_free_bytes},
          {"largest_free_bytes", t.largest_free_bytes}};
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
    whatif.push_back({{"conf", w.conf},
                      {"recorded", w.recorded},
                      {"peak_reserved_bytes", w.peak_reserved_bytes},
                      {"peak_reserved_at_capacity_bytes", optional_json(w.peak_reserved_at_capacity_bytes)},
                      {"at_capacity", whatif_at_capacity(w)},
                      {"passes_oom_point", optional_json(w.passes_oom_point)},
                      {"fits", optional_json(w.fits)},
                      {"runs_projected_step", optional_json(w.runs_projected_step)}});
  json advice = json::array();
  for (const auto& a : d.memory_advice)
    advice.push_back(
        {{"key", a.key}, {"title", a.title}, {"setting", a.setting}, {"evidence", a.evidence}, {"bytes", a.bytes}});
  json skipped = json::array();
  for (const auto& [path, reason] : d.skipped_inputs) skipped.push_back({{"path", path}, {"reason", reason}});
  json ranks = json::array();
  for (const auto& r : d.ranks)
    ranks.push_back({{"rank", r.rank}, {"oom", r.oom}, {"peak_reserved_bytes", optional_json(r.peak_reserved_bytes)},
                     {"peak_allocated_bytes", optional_json(r.peak_allocated_bytes)},
                     {"data_wait_fraction", optional_json(r.data_wait_fraction)}, {"sources", r.sources}});
  json doc = {{"verdict", std::string(diagnose::to_string(d.verdict))},
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
          {"warnings", d.warnings},
          {"decide_with", d.decide_with},
          {"healthy", d.healthy},
          {"oom", oom_json(d.oom_context)},
          {"library_alloc_failure", d.library_failure ? json{{"library", d.library_failure->library},
                                                             {"status", d.library_failure->status},
                                                             {"call", d.library_failure->call},
                                                             {"source", d.library_failure->source}}
                                                      : json(nullptr)},
          {"capacity_bytes", optional_json(d.capacity_bytes)},
          {"capacity_source", d.capacity_source},
          {"projection", projection_json(d.projection)},
          {"trace_projection", trace_projection_json(d.trace_projection)},
          {"run_growth", d.run_growth.grows() ? json{{"per_step_bytes", d.run_growth.per_step_bytes},
                                                     {"steps", d.run_growth.steps},
                                                     {"eval_batches", d.run_growth.eval_batches},
                                                     {"regrown", d.run_growth.regrown},
                                                     {"peak_per_step_bytes", d.run_growth.peak_per_step_bytes},
                                                     {"kept_bytes", d.run_growth.kept_bytes},
                                                     {"frame", d.run_growth.frame}}
                                              : json(nullptr)},
          {"whatif", whatif},
          {"memory_advice", advice},
          {"recommended_alloc_conf", d.recommended_conf.empty() ? json(nullptr) : json(d.recommended_conf)},
          {"ideal_peak_bytes", optional_json(d.ideal_peak_bytes)},
          {"segment_map", segment_map_json(d)},
          {"ranks", ranks},
          {"worst_rank", optional_json(d.worst_rank)},
          {"rank_spread", d.rank_spread},
          {"inputs_used", d.inputs_used},
          {"skipped_inputs", skipped},
          {"inputs_missing", d.inputs_missing}};
  add_json_header(doc, kDoctorJsonSchema);
  return doc;
}

}  // namespace fragscope::report

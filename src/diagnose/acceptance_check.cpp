#include "diagnose/acceptance_check.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "inputs/nvidia_smi_trace.h"
#include "inputs/telemetry_reader.h"
#include "util/bytes.h"
#include "util/error.h"
#include "util/quantiles.h"
#include "util/shown_text.h"

namespace fragscope::diagnose {

namespace {

using inputs::StepRecord;

std::string percent(double fraction) { return fmt::format("{:.1f}%", fraction * 100.0); }

std::string at_most_percent(double fraction) { return "≤ " + percent(fraction); }

// A rank's train records cut into optimizer steps, warm-up first.
struct Steps {
  std::vector<std::vector<const StepRecord*>> steady;  // complete steps after the warm-up
  std::vector<const StepRecord*> steady_records;       // train records after the warm-up
  std::size_t count = 0;                               // complete steps, warm-up included
};

Steps cut_into_steps(const std::vector<StepRecord>& records, std::int64_t warmup_steps) {
  Steps steps;
  const auto warmup = static_cast<std::size_t>(warmup_steps);
  std::vector<const StepRecord*> current;
  for (const auto& record : records) {
    if (record.phase_or_default() != inputs::kDefaultPhase) continue;
    current.push_back(&record);
    if (!record.optimizer_step.value_or(true)) continue;
    if (steps.count >= warmup) {
      steps.steady.push_back(current);
      steps.steady_records.insert(steps.steady_records.end(), current.begin(), current.end());
    }
    ++steps.count;
    current.clear();
  }
  if (steps.count >= warmup)  // a trailing accumulation without its optimizer step yet
    steps.steady_records.insert(steps.steady_records.end(), current.begin(), current.end());
  return steps;
}

struct SmiGpu {
  std::string source;  // file name only, for the subject
  inputs::SmiGpuSummary summary;
};

CriterionResult make(std::string criterion, const RankTelemetry& rank) {
  CriterionResult r;
  r.criterion = std::move(criterion);
  r.subject = fmt::format("rank {}", rank.rank);
  r.rank = rank.rank;
  return r;
}

void judge(CriterionResult& r, double measured, double limit) {
  r.measured = measured;
  r.limit = limit;
  r.verdict = measured <= limit ? CriterionVerdict::kPass : CriterionVerdict::kFail;
}

// The largest value of a memory_stats key over `records`; nullopt when no record has it.
std::optional<std::int64_t> max_stat(const std::vector<StepRecord>& records, std::string_view key) {
  std::optional<std::int64_t> best;
  for (const auto& record : records)
    if (const auto v = record.memory_stat(key)) best = std::max(best.value_or(*v), *v);
  return best;
}

CriterionResult check_hbm(const AcceptanceCriteria& criteria, const RankTelemetry& rank,
                          const std::vector<SmiGpu>& gpus, std::vector<std::string>& warnings) {
  CriterionResult r = make("max_hbm_fraction", rank);
  r.limit = criteria.max_hbm_fraction;
  r.limit_text = at_most_percent(criteria.max_hbm_fraction);
  auto peak = max_stat(rank.records, "reserved_bytes.all.peak");
  const char* peak_key = "reserved_bytes.all.peak";
  if (!peak) {
    peak = max_stat(rank.records, "reserved_bytes.all.current");
    peak_key = "reserved_bytes.all.current";
  }
  if (!peak) {
    r.detail = "telemetry has no reserved_bytes.all.peak";
    return r;
  }
  std::optional<std::uint64_t> telemetry_total;
  for (const auto& record : rank.records)
    if (record.device_total_bytes.value_or(0) > 0)
      telemetry_total =
          std::max<std::uint64_t>(telemetry_total.value_or(0), static_cast<std::uint64_t>(*record.device_total_bytes));
  std::optional<std::uint64_t> total;
  std::string total_source;
  if (criteria.device_memory_bytes) {
    // The plan's card: a canary run on another card or slice still answers for the planned one.
    total = criteria.device_memory_bytes;
    total_source = "the planned card: criteria device_memory_bytes";
    const double ratio = telemetry_total ? static_cast<double>(*telemetry_total) / static_cast<double>(*total) : 1.0;
    if (ratio < 1.0 - kDeviceMismatch || ratio > 1.0 + kDeviceMismatch)
      warnings.push_back(fmt::format("rank {}: the telemetry's device has {} but the plan's criteria are for a {} "
                                     "card: the HBM peak is judged against the planned card",
                                     rank.rank, format_bytes(*telemetry_total), format_bytes(*total)));
  } else if (telemetry_total) {
    total = telemetry_total;
    total_source = "telemetry device_total_bytes";
  } else {
    std::optional<int> local_rank;
    for (const auto& record : rank.records)
      if (record.local_rank) local_rank = record.local_rank;
    std::set<std::uint64_t> totals;
    for (const auto& gpu : gpus) {
      if (gpu.summary.memory_total.value_or(0) == 0) continue;
      totals.insert(*gpu.summary.memory_total);
      if (local_rank && gpu.summary.gpu == *local_rank) total = gpu.summary.memory_total;
    }
    if (!total && totals.size() == 1) total = *totals.begin();
    if (total) total_source = "nvidia-smi memory.total";
  }
  if (!total) {
    r.detail = fmt::format("peak reserved {}; device memory unknown (set device_memory_bytes in the "
                           "criteria, pass --smi, or record device_total_bytes)",
                           format_bytes(static_cast<std::uint64_t>(*peak)));
    return r;
  }
  judge(r, static_cast<double>(*peak) / static_cast<double>(*total), criteria.max_hbm_fraction);
  r.measured_text = percent(*r.measured);
  r.detail = fmt::format("{} {} of {} ({})", peak_key, format_bytes(static_cast<std::uint64_t>(*peak)),
                         format_bytes(*total), total_source);
  return r;
}

CriterionResult check_data_wait(const char* criterion, double limit, const RankTelemetry& rank,
                                const Steps& steps, const AcceptanceCriteria& criteria) {
  CriterionResult r = make(criterion, rank);
  r.limit = limit;
  r.limit_text = at_most_percent(limit);
  double wait = 0;
  double total = 0;
  for (const auto* record : steps.steady_records) {
    wait += record->data_wait_ms;
    total += record->data_wait_ms + record->compute_ms;
  }
  if (!(total > 0)) {
    r.detail = steps.steady_records.empty()
                   ? fmt::format("no train steps after the {} warm-up steps ({} steps recorded)",
                                 criteria.warmup_steps, steps.count)
                   : "no data_wait_ms / compute_ms recorded";
    return r;
  }
  judge(r, wait / total, limit);
  r.measured_text = percent(*r.measured);
  r.detail = fmt::format("{:.0f} of {:.0f} ms waiting for data over {} micro-steps after {} warm-up steps",
                         wait, total, steps.steady_records.size(), criteria.warmup_steps);
  return r;
}

// The first record where a counter is above its baseline: "step 11 (phase eval)".
std::string first_increase(const std::vector<StepRecord>& records, std::string_view key, std::int64_t baseline) {
  for (const auto& record : records)
    if (record.memory_stat(key).value_or(baseline) > baseline)
      return fmt::format("first counted at step {} (phase {})", record.step, record.phase_or_default());
  return "";
}

CriterionResult check_ooms(const AcceptanceCriteria& criteria, const RankTelemetry& rank) {
  CriterionResult r = make("allow_oom", rank);
  r.limit_text = criteria.allow_oom ? "any" : "0";
  const auto ooms = max_stat(rank.records, "num_ooms");
  if (!ooms) {
    r.detail = "telemetry has no num_ooms";
    return r;
  }
  r.measured = static_cast<double>(*ooms);
  r.measured_text = fmt::format("{}", *ooms);
  if (criteria.allow_oom) {
    r.verdict = CriterionVerdict::kPass;
    r.detail = "OOMs allowed by the criteria";
    return r;
  }
  judge(r, static_cast<double>(*ooms), 0);
  r.detail = *ooms == 0 ? fmt::format("num_ooms stayed 0 over {} records, every phase", rank.records.size())
                        : first_increase(rank.records, "num_ooms", 0);
  return r;
}

CriterionResult check_retries(const AcceptanceCriteria& criteria, const RankTelemetry& rank) {
  CriterionResult r = make("max_alloc_retries", rank);
  r.limit = static_cast<double>(criteria.max_alloc_retries);
  r.limit_text = fmt::format("≤ {}", criteria.max_alloc_retries);
  const StepRecord* first = nullptr;
  for (const auto& record : rank.records)
    if (record.memory_stat("num_alloc_retries")) {
      first = &record;
      break;
    }
  if (!first) {
    r.detail = "telemetry has no num_alloc_retries";
    return r;
  }
  // The counter starts with the process: telemetry from step 0 on counts from 0.
  const std::int64_t baseline = first->step == 0 ? 0 : *first->memory_stat("num_alloc_retries");
  const std::int64_t end = *max_stat(rank.records, "num_alloc_retries");
  judge(r, static_cast<double>(end - baseline), r.limit.value());
  r.measured_text = fmt::format("{}", end - baseline);
  r.detail = fmt::format("num_alloc_retries {} → {}", baseline, end);
  if (end > baseline) r.detail += ", " + first_increase(rank.records, "num_alloc_retries", baseline);
  return r;
}

std::string not_enough_steps(const Steps& steps, const AcceptanceCriteria& criteria) {
  return fmt::format("{} steady steps after {} warm-up steps; need at least {}", steps.steady.size(),
                     criteria.warmup_steps, kMinSpreadSteps);
}

CriterionResult check_step_time(const AcceptanceCriteria& criteria, const RankTelemetry& rank, const Steps& steps) {
  CriterionResult r = make("max_step_time_spread", rank);
  r.limit = criteria.max_step_time_spread;
  r.limit_text = at_most_percent(criteria.max_step_time_spread);
  if (steps.steady.size() < kMinSpreadSteps) {
    r.detail = not_enough_steps(steps, criteria);
    return r;
  }
  std::vector<double> times;
  for (const auto& step : steps.steady)
    times.push_back(std::accumulate(step.begin(), step.end(), 0.0,
                                    [](double sum, const StepRecord* s) { return sum + s->step_time_or_sum_ms(); }));
  const auto spread = relative_spread(times);
  if (!spread) {
    r.detail = "steady steps have no recorded time";
    return r;
  }
  judge(r, *spread, criteria.max_step_time_spread);
  r.measured_text = percent(*spread);
  r.detail = fmt::format("step time p10 {:.1f} / median {:.1f} / p90 {:.1f} ms over {} steps",
                         *quantile(times, 0.1), *quantile(times, 0.5),
                         *quantile(times, 0.9), times.size());
  return r;
}

CriterionResult check_throughput(const AcceptanceCriteria& criteria, const RankTelemetry& rank, const Steps& steps) {
  CriterionResult r = make("max_throughput_spread", rank);
  r.limit = criteria.max_throughput_spread;
  r.limit_text = at_most_percent(criteria.max_throughput_spread);
  if (steps.steady.size() < kMinSpreadSteps) {
    r.detail = not_enough_steps(steps, criteria);
    return r;
  }
  const auto all_have = [&](auto member) {
    return std::all_of(steps.steady_records.begin(), steps.steady_records.end(),
                       [&](const StepRecord* s) { return (s->*member).has_value(); });
  };
  std::string unit;
  std::vector<double> rates;
  for (const auto& step : steps.steady) {
    double ms = 0, amount = 0;
    for (const auto* s : step) ms += s->step_time_or_sum_ms();
    if (all_have(&StepRecord::mbs)) {
      unit = "samples/s";
      for (const auto* s : step) amount += static_cast<double>(*s->mbs);
    } else if (all_have(&StepRecord::tokens)) {
      unit = "tokens/s";
      for (const auto* s : step) amount += static_cast<double>(*s->tokens);
    } else if (all_have(&StepRecord::samples_per_s)) {
      unit = "samples/s";  // reported by the hook per micro-step: average them
      for (const auto* s : step) amount += *s->samples_per_s;
      rates.push_back(amount / static_cast<double>(step.size()));
      continue;
    } else {
      r.detail = "telemetry has neither mbs, tokens nor samples_per_s";
      return r;
    }
    if (ms > 0) rates.push_back(amount / (ms / 1000.0));
  }
  const auto spread = relative_spread(rates);
  if (!spread) {
    r.detail = "steady steps have no recorded time";
    return r;
  }
  judge(r, *spread, criteria.max_throughput_spread);
  r.measured_text = percent(*spread);
  r.detail = fmt::format("{} p10 {:.1f} / median {:.1f} / p90 {:.1f} over {} steps", unit,
                         *quantile(rates, 0.1), *quantile(rates, 0.5),
                         *quantile(rates, 0.9), rates.size());
  return r;
}

CriterionResult check_gpu_idle(const AcceptanceCriteria& criteria, const SmiGpu& gpu) {
  CriterionResult r;
  r.criterion = "max_gpu_idle_fraction";
  r.subject = fmt::format("gpu {} ({})", gpu.summary.gpu, shown_name(gpu.source, kShownPathBytes));
  r.limit_text = at_most_percent(criteria.max_gpu_idle_fraction);
  judge(r, gpu.summary.idle_fraction.value_or(1.0), criteria.max_gpu_idle_fraction);
  r.measured_text = percent(*r.measured);
  r.detail = fmt::format("{} of {} nvidia-smi samples in the busy window below {:.0f}% utilisation; mean {:.1f}%",
                         static_cast<std::size_t>(std::lround(*r.measured * double(gpu.summary.window_samples))),
                         gpu.summary.window_samples, kIdleUtilizationPercent,
                         gpu.summary.utilization_mean.value_or(0.0));
  if (gpu.summary.window_seconds) r.detail += fmt::format(" over {:.1f} s", *gpu.summary.window_seconds);
  return r;
}

CriterionResult check_phases(const AcceptanceCriteria& criteria, const std::vector<RankTelemetry>& ranks) {
  CriterionResult r;
  r.criterion = "required_phases";
  r.subject = "all ranks";
  r.limit_text =
      criteria.required_phases.empty() ? "none" : fmt::format("{}", fmt::join(criteria.required_phases, ", "));
  std::vector<std::string> seen;
  for (const auto& rank : ranks)
    for (const auto& record : rank.records)
      if (std::find(seen.begin(), seen.end(), record.phase_or_default()) == seen.end())
        seen.push_back(record.phase_or_default());
  std::vector<std::string> missing;
  for (const auto& phase : criteria.required_phases)
    if (std::find(seen.begin(), seen.end(), phase) == seen.end()) missing.push_back(phase);
  r.measured = static_cast<double>(missing.size());
  r.limit = 0;
  r.measured_text = fmt::format("{}", fmt::join(seen, ", "));
  r.verdict = missing.empty() ? CriterionVerdict::kPass : CriterionVerdict::kFail;
  r.detail = missing.empty() ? "every required phase appears in the telemetry"
                             : fmt::format("missing: {} (phase field; absent = train)", fmt::join(missing, ", "));
  return r;
}

}  // namespace

std::vector<RankTelemetry> group_by_rank(std::vector<TelemetryFile> files) {
  std::map<int, RankTelemetry> ranks;
  for (std::size_t i = 0; i < files.size(); ++i) {
    TelemetryFile& file = files[i];
    const auto rank_of = [i](const StepRecord& record) { return record.rank.value_or(static_cast<int>(i)); };
    std::map<int, std::size_t> counts;  // this file's records per rank
    for (const StepRecord& record : file.records) {
      const int rank = rank_of(record);
      if (const auto it = ranks.find(rank); it != ranks.end() && it->second.source != file.source)
        throw InputError(fmt::format("{}: rank {} also appears in {} (one file per rank, or a rank field)",
                                     file.source, rank, it->second.source));
      ++counts[rank];
    }
    if (counts.size() == 1 && !ranks.contains(counts.begin()->first)) {
      // One rank in the file, as the hook writes them: its records change hands whole.
      const int rank = counts.begin()->first;
      ranks.emplace(rank, RankTelemetry{rank, file.source, std::move(file.records)});
      continue;
    }
    for (const auto& [rank, count] : counts) {
      RankTelemetry& group = ranks.try_emplace(rank, RankTelemetry{rank, file.source, {}}).first->second;
      group.records.reserve(group.records.size() + count);  // once: grown by doubling, it took twice the records
    }
    for (StepRecord& record : file.records) ranks[rank_of(record)].records.push_back(std::move(record));
    // A moved-from record still takes sizeof(StepRecord): freed before the next file's groups are reserved.
    std::vector<StepRecord>().swap(file.records);
  }
  std::vector<RankTelemetry> out;
  out.reserve(ranks.size());
  for (auto& [rank, telemetry] : ranks) out.push_back(std::move(telemetry));
  return out;
}

std::size_t CheckReport::count(CriterionVerdict verdict) const {
  return static_cast<std::size_t>(std::count_if(results.begin(), results.end(),
                                                [&](const CriterionResult& r) { return r.verdict == verdict; }));
}

CheckInput read_check_input(const std::vector<std::string>& telemetry_paths,
                            const std::vector<std::string>& smi_paths) {
  std::vector<TelemetryFile> files;
  for (const std::string& path : telemetry_paths) files.push_back({path, inputs::read_telemetry_file(path)});
  CheckInput input;
  input.ranks = group_by_rank(std::move(files));
  for (const std::string& path : smi_paths) input.smi.push_back(inputs::read_nvidia_smi_csv_file(path));
  return input;
}

CheckReport check_acceptance(const AcceptanceCriteria& criteria, const CheckInput& input, bool allow_unevaluated) {
  std::vector<SmiGpu> gpus;
  std::vector<std::string> short_files;
  for (const auto& table : input.smi) {
    const auto name = std::filesystem::path(table.source).filename().string();
    for (auto& summary : inputs::summarize_smi_trace(table, {kIdleUtilizationPercent}))
      gpus.push_back({name, std::move(summary)});
  }
  std::vector<const SmiGpu*> traces;
  for (const auto& gpu : gpus) {
    if (gpu.summary.utilization_samples >= kMinTraceSamples) traces.push_back(&gpu);
    else short_files.push_back(fmt::format("{} gpu {} ({} samples)", shown_name(gpu.source, kShownPathBytes),
                                           gpu.summary.gpu, gpu.summary.utilization_samples));
  }

  CheckReport report;
  report.allow_unevaluated = allow_unevaluated;
  for (const auto& rank : input.ranks) {
    const Steps steps = cut_into_steps(rank.records, criteria.warmup_steps);
    report.results.push_back(check_hbm(criteria, rank, gpus, report.warnings));
    report.results.push_back(
        check_data_wait("max_data_wait_fraction", criteria.max_data_wait_fraction, rank, steps, criteria));
    if (traces.empty()) {
      auto idle = check_data_wait("max_gpu_idle_fraction", criteria.max_gpu_idle_fraction, rank, steps, criteria);
      idle.detail = (short_files.empty()
                         ? std::string("no nvidia-smi trace (--smi): data wait stands in")
                         : fmt::format("no nvidia-smi trace of at least {} samples ({}): data wait stands in",
                                       kMinTraceSamples, fmt::join(short_files, ", "))) +
                    (idle.measured ? "" : "; " + idle.detail);
      report.results.push_back(std::move(idle));
    }
    report.results.push_back(check_ooms(criteria, rank));
    report.results.push_back(check_retries(criteria, rank));
    report.results.push_back(check_step_time(criteria, rank, steps));
    report.results.push_back(check_throughput(criteria, rank, steps));
  }
  for (const auto* gpu : traces) report.results.push_back(check_gpu_idle(criteria, *gpu));
  report.results.push_back(check_phases(criteria, input.ranks));
  return report;
}

std::string_view criterion_label(std::string_view criterion) {
  if (criterion == "max_hbm_fraction") return "HBM peak";
  if (criterion == "max_data_wait_fraction") return "data wait";
  if (criterion == "max_gpu_idle_fraction") return "GPU idle";
  if (criterion == "allow_oom") return "OOMs";
  if (criterion == "max_alloc_retries") return "alloc retries";
  if (criterion == "required_phases") return "phases";
  if (criterion == "max_step_time_spread") return "step time spread";
  if (criterion == "max_throughput_spread") return "throughput spread";
  return criterion;
}

std::string_view verdict_text(CriterionVerdict verdict) {
  switch (verdict) {
    case CriterionVerdict::kPass: return "pass";
    case CriterionVerdict::kFail: return "FAIL";
    case CriterionVerdict::kNotEvaluated: break;
  }
  return "not evaluated";
}

}  // namespace fragscope::diagnose

#include "diagnose/doctor.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "diagnose/doctor_actions.h"
#include "diagnose/input_pipeline.h"
#include "diagnose/library_failure.h"
#include "diagnose/oom_context.h"
#include "diagnose/recorded_curve.h"
#include "diagnose/segment_map_at_event.h"
#include "diagnose/step_alignment.h"
#include "diagnose/trace_units.h"
#include "diagnose/traced_oom_verdict.h"
#include "diagnose/whatif_lines.h"
#include "inputs/nvidia_smi_trace.h"
#include "metrics/segment_map.h"
#include "replay/capacity.h"
#include "replay/prepared_trace.h"
#include "replay/whatif.h"
#include "util/bytes.h"
#include "util/counted.h"
#include "util/error.h"
#include "util/quantiles.h"

namespace fragscope::diagnose {
namespace {

std::string pct(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

TraceChoice choose_trace(const DoctorInputs& in, const std::optional<int>& rank, bool oom) {
  TraceChoice choice;
  std::vector<const SnapshotInput*> candidates;
  for (const SnapshotInput& s : in.snapshots)
    if (may_be_same_rank(rank, s.rank)) candidates.push_back(&s);
  if (candidates.empty())
    for (const SnapshotInput& s : in.snapshots) candidates.push_back(&s);
  std::size_t best_events = 0;
  std::size_t best_tail = SIZE_MAX;
  for (const SnapshotInput* s : candidates) {
    const std::size_t events = s->snapshot.trace(s->device).size();
    if (oom && !s->oom_index) continue;
    if (events > best_events || !choice.replay) {
      best_events = events;
      choice.replay = s;
      choice.device = s->device;
      choice.oom_index = s->oom_index;
    }
    const std::size_t tail = s->oom_index ? events - *s->oom_index : 0;
    if (tail < best_tail) {
      best_tail = tail;
      choice.map = s;
      choice.map_oom_index = s->oom_index;
    }
  }
  if (!choice.replay && !candidates.empty()) {  // an OOM known from elsewhere; no trace holds it
    choice.replay = candidates.front();
    choice.map = candidates.front();
    choice.device = choice.replay->device;
  }
  return choice;
}

const TelemetryInput* choose_telemetry(const DoctorInputs& in, const std::optional<int>& rank) {
  if (in.telemetry.empty()) return nullptr;
  for (const TelemetryInput& t : in.telemetry)
    if (rank && t.rank == rank) return &t;
  return &in.telemetry.front();
}

std::vector<inputs::SmiGpuSummary> smi_summaries(const DoctorInputs& in) {
  std::vector<inputs::SmiGpuSummary> all;
  for (const SmiInput& smi : in.smi)
    for (const auto& gpu : inputs::summarize_smi_trace(smi.table)) all.push_back(gpu);
  return all;
}

void describe_inputs(const DoctorInputs& in, bool oom, Diagnosis& d) {
  for (const auto& s : in.snapshots) d.inputs_used.push_back("snapshot: " + s.path);
  for (const auto& t : in.telemetry)
    d.inputs_used.push_back(fmt::format(
        "telemetry ({} steps{}): {}", t.records.size(),
        t.cut_last_line ? fmt::format("; line {}, cut off by the crash, left out", *t.cut_last_line) : "", t.path));
  for (const auto& s : in.stats) d.inputs_used.push_back("memory_stats: " + s.path);
  for (const auto& s : in.smi)
    d.inputs_used.push_back(fmt::format("nvidia-smi ({} samples): {}", s.table.samples.size(), s.path));
  for (const auto& s : in.summaries) d.inputs_used.push_back("memory_summary: " + s.path);
  for (const auto& l : in.logs)
    d.inputs_used.push_back(
        fmt::format("log ({} OOM message{}): {}", l.ooms.size(), l.ooms.size() == 1 ? "" : "s", l.path));
  for (const auto& l : in.library_failures)
    d.inputs_used.push_back(fmt::format("log ({} library allocation failure{}): {}", l.failures.size(),
                                        l.failures.size() == 1 ? "" : "s", l.path));
  for (const auto& l : in.cudnn_no_plan)
    d.inputs_used.push_back(fmt::format("log (cuDNN found no plan, line {}): {}", l.line, l.path));
  for (const auto& u : in.unrecognised) d.inputs_used.push_back("not recognised, ignored: " + u);
  for (const auto& skipped : in.skipped) d.skipped_inputs.emplace_back(skipped.path, skipped.reason);
  if (in.snapshots.empty())
    d.inputs_missing.push_back(
        "a snapshot with history (torch.cuda.memory._record_memory_history(stacks=\"python\") + "
        "_dump_snapshot): the counterfactual replay, the what-if table, the segment map and the phase from call "
        "stacks");
  if (in.telemetry.empty())
    d.inputs_missing.push_back(
        "step telemetry (steps.jsonl from the fragscope hook): the data-wait share and the failing "
        "step's projected peak");
  if (in.logs.empty() && oom)
    d.inputs_missing.push_back(
        "the training log with the OOM message: the request and the driver's free memory as PyTorch reported them");
  if (in.stats.empty())
    d.inputs_missing.push_back("torch.cuda.memory_stats() as JSON: peaks, cudaMalloc retries and the OOM count");
  if (in.smi.empty())
    d.inputs_missing.push_back(
        "nvidia-smi CSV: what the driver showed (the blind spot); sampled with -lms 100, the GPU's idle time");
  if (in.summaries.empty())
    d.inputs_missing.push_back("torch.cuda.memory_summary(): a cross-check of the memory_stats figures");
}

std::uint64_t telemetry_max(const std::vector<inputs::StepRecord>& records, std::string_view key) {
  std::int64_t best = 0;
  for (const auto& r : records) best = std::max(best, r.memory_stat(key).value_or(0));
  return static_cast<std::uint64_t>(best);
}

std::optional<std::uint64_t> stat_bytes(const inputs::StepRecord& r, std::string_view key) {
  const auto v = r.memory_stat(key);
  return v && *v >= 0 ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(*v)) : std::nullopt;
}

std::vector<StepTime> step_times_of(const std::vector<inputs::StepRecord>& records) {
  std::vector<StepTime> times;
  for (const inputs::StepRecord& r : records)
    times.push_back({r.step, r.data_wait_ms, r.compute_ms, r.t, stat_bytes(r, "reserved_bytes.all.current"),
                     stat_bytes(r, "allocated_bytes.all.current")});
  return times;
}

/// The curve downsampled to `points`, each point with its time when the trace records time.
std::vector<TimelineSample> timeline_of(const RecordedCurve& curve, std::span<const snapshot::TraceEvent> trace,
                                        std::size_t points) {
  std::vector<TimelineSample> timeline;
  const bool timed = !trace.empty() && trace.front().time_us != 0;
  for (const CurvePoint& p : downsample_curve(curve, points)) {
    TimelineSample sample{p.trace_index, p.reserved, p.allocated, p.reserved_min, p.allocated_min, std::nullopt};
    if (timed) sample.seconds = static_cast<double>(trace[p.trace_index].time_us - trace.front().time_us) / 1e6;
    timeline.push_back(sample);
  }
  return timeline;
}

/// Points of each rank's curve in the per-rank pictures (small multiples of the page).
constexpr std::size_t kRankTimelinePoints = 600;

void collect_ranks(const DoctorInputs& in, const OomSignals& oom, Diagnosis& d) {
  std::map<int, RankFacts> ranks;
  auto at = [&](std::optional<int> rank) -> RankFacts& {
    const int r = rank.value_or(0);
    RankFacts& f = ranks[r];
    f.rank = r;
    return f;
  };
  for (const auto& t : in.telemetry) {
    RankFacts& f = at(t.rank);
    f.data_wait_fraction = inputs::data_wait_fraction(t.records);
    if (const auto v = telemetry_max(t.records, "reserved_bytes.all.peak"))
      f.peak_reserved_bytes = std::max(f.peak_reserved_bytes.value_or(0), v);
    if (const auto v = telemetry_max(t.records, "allocated_bytes.all.peak"))
      f.peak_allocated_bytes = std::max(f.peak_allocated_bytes.value_or(0), v);
    f.sources.push_back(t.path);
  }
  for (const auto& s : in.stats) {
    RankFacts& f = at(s.rank);
    f.peak_reserved_bytes = std::max<std::uint64_t>(f.peak_reserved_bytes.value_or(0), s.stats.reserved_bytes.all.peak);
    f.peak_allocated_bytes =
        std::max<std::uint64_t>(f.peak_allocated_bytes.value_or(0), s.stats.allocated_bytes.all.peak);
    f.oom |= s.stats.num_ooms > 0;
    f.sources.push_back(s.path);
  }
  for (const auto& s : in.snapshots) {
    RankFacts& f = at(s.rank);
    f.oom |= s.oom_index.has_value();
    f.sources.push_back(s.path);
  }
  // A message without a rank prefix tells which rank failed only when the inputs are of one rank.
  for (const auto& m : oom.messages) {
    if (m.rank) at(m.rank).oom = true;
    else if (ranks.size() == 1) ranks.begin()->second.oom = true;
    else if (ranks.empty()) at(std::nullopt).oom = true;
  }
  if (ranks.size() >= 2) {
    for (const auto& t : in.telemetry)
      if (RankFacts& f = at(t.rank); f.step_times.empty()) f.step_times = step_times_of(t.records);
    std::map<int, const SnapshotInput*> longest;
    for (const auto& s : in.snapshots) {
      const SnapshotInput*& best = longest[s.rank.value_or(0)];
      if (!best || s.snapshot.trace(s.device).size() > best->snapshot.trace(best->device).size()) best = &s;
    }
    for (const auto& [rank, s] : longest) {
      const auto trace = s->snapshot.trace(s->device);
      at(rank).timeline = timeline_of(walk_recorded_curve(s->snapshot, s->device), trace, kRankTimelinePoints);
    }
  }
  for (auto& [rank, facts] : ranks) d.ranks.push_back(facts);
}

/// The nvidia-smi trace of `gpu` (else of the first GPU) from the input with the most samples.
void collect_smi_trace(const DoctorInputs& in, std::optional<int> gpu, Diagnosis& d) {
  const SmiInput* longest = nullptr;
  for (const SmiInput& smi : in.smi)
    if (!longest || smi.table.samples.size() > longest->table.samples.size()) longest = &smi;
  if (!longest || longest->table.samples.size() < kMinSmiTraceSamples) return;
  const auto& samples = longest->table.samples;
  const bool has_gpu = gpu && std::any_of(samples.begin(), samples.end(), [&](const auto& s) { return s.gpu == *gpu; });
  d.smi_gpu = has_gpu ? *gpu : samples.front().gpu;
  std::optional<double> first;
  for (const inputs::SmiSample& s : samples) {
    if (s.gpu != *d.smi_gpu || !s.time_s) continue;
    if (!first) first = s.time_s;
    d.smi_trace.push_back({*s.time_s - *first, s.utilization_gpu, s.memory_used});
  }
}

/// The worst rank (the one that ran out of memory, else `waiting` — the most input-bound —,
/// else the highest reserved peak) and the spread across ranks, when there are several.
void describe_rank_spread(Diagnosis& d, std::optional<int> waiting) {
  if (d.ranks.size() < 2) return;
  auto worst = std::max_element(d.ranks.begin(), d.ranks.end(), [](const RankFacts& a, const RankFacts& b) {
    if (a.oom != b.oom) return !a.oom;
    return a.peak_reserved_bytes.value_or(0) < b.peak_reserved_bytes.value_or(0);
  });
  if (!worst->oom && waiting)
    worst = std::find_if(d.ranks.begin(), d.ranks.end(), [&](const RankFacts& r) { return r.rank == *waiting; });
  d.worst_rank = worst->rank;
  std::uint64_t lo = UINT64_MAX, hi = 0;
  double wlo = 2, whi = -1;
  for (const RankFacts& f : d.ranks) {
    if (f.peak_reserved_bytes) {
      lo = std::min(lo, *f.peak_reserved_bytes);
      hi = std::max(hi, *f.peak_reserved_bytes);
    }
    if (f.data_wait_fraction) {
      wlo = std::min(wlo, *f.data_wait_fraction);
      whi = std::max(whi, *f.data_wait_fraction);
    }
  }
  std::string spread =
      fmt::format("{} ranks; worst rank {}{}", d.ranks.size(), worst->rank, worst->oom ? " (ran out of memory)" : "");
  if (hi > 0)
    spread +=
        fmt::format("; peak reserved {} – {} (spread {})", format_bytes(lo), format_bytes(hi), format_bytes(hi - lo));
  if (whi >= 0) spread += fmt::format("; data wait {} – {}", pct(wlo), pct(whi));
  d.rank_spread = spread;
}

/// A snapshot given without a trace of its OOM: no entries at all (history not recording when the
/// OOM came: started later, or stopped), or entries without an `oom` one (dumped before it, or stopped).
std::string snapshot_without_oom_trace(const DoctorInputs& in) {
  for (const SnapshotInput& s : in.snapshots) {
    if (s.oom_index) continue;
    return s.snapshot.trace(s.device).empty()
               ? fmt::format("{} holds the allocator's blocks but no trace entries: history was not recording "
                             "when the OOM came (_record_memory_history started after it, or was stopped)",
                             s.path)
               : fmt::format("{}'s trace holds no `oom` entry: it was dumped before the OOM, or history was "
                             "stopped before it",
                             s.path);
  }
  return "";
}

/// The snapshot of the only kind of input given whose trace is empty: nothing given could have shown an OOM
/// (no log, memory_stats, summary or telemetry, and history was off). Empty when any input could.
std::string snapshot_blind_to_oom(const DoctorInputs& in) {
  if (in.snapshots.empty() || !in.logs.empty() || !in.stats.empty() || !in.summaries.empty() || !in.telemetry.empty())
    return "";
  for (const SnapshotInput& s : in.snapshots)
    if (!s.snapshot.trace(s.device).empty()) return "";
  return in.snapshots.front().path;
}

/// "path:line" of the first logged OOM that PyTorch's C shim raised (inputs::OomMessage::raised_in_c_shim), or "".
std::string oom_in_c_shim(const DoctorInputs& in) {
  for (const LogInput& log : in.logs)
    for (const inputs::OomMessage& oom : log.ooms)
      if (oom.raised_in_c_shim) return fmt::format("{}:{}", log.path, oom.line);
  return "";
}

/// An OOM known only from messages / stats: decide what the numbers can prove.
Verdict judge_oom_without_trace(const DoctorInputs& in, Diagnosis& d) {
  const OomContext& c = *d.oom_context;
  d.phase = phase_name(JobPhase::kUnknown);
  d.phase_source = "no trace with call stacks and no telemetry phase";
  if (c.driver_free_bytes && c.reserved_unallocated &&
      c.request_bytes > *c.driver_free_bytes + *c.reserved_unallocated) {
    d.add_evidence(
        "request_vs_free",
        fmt::format("the request ({}) exceeds the driver's free memory plus everything PyTorch had cached ({} + {}): "
                    "no allocator setting can serve it",
                    format_bytes(c.request_bytes), format_bytes(*c.driver_free_bytes),
                    format_bytes(*c.reserved_unallocated)));
    return Verdict::kCapacity;
  }
  // Under set_per_process_memory_fraction every setting counts what it reserves against the cap, and it reserves
  // at least the live blocks and the request.
  if (c.allowed_bytes && c.allocated_bytes && c.request_bytes > 0 &&
      *c.allocated_bytes + c.request_bytes >
          *c.allowed_bytes + pytorch_print_error(*c.allocated_bytes) + pytorch_print_error(*c.allowed_bytes)) {
    d.add_evidence("request_vs_cap",
                   fmt::format("the live blocks ({}) and the request ({}) exceed the {} the process may use "
                               "(set_per_process_memory_fraction): no allocator setting can serve it",
                               format_bytes(*c.allocated_bytes), format_bytes(c.request_bytes),
                               format_bytes(*c.allowed_bytes)));
    return Verdict::kCapacity;
  }
  d.add_evidence("undecidable", "without a trace the doctor cannot replay the run or project the failing step");
  if (const std::string why = snapshot_without_oom_trace(in); !why.empty()) d.add_evidence("no_trace", why);
  const std::string shim_oom = oom_in_c_shim(in);
  d.decide_with = {
      shim_oom.empty()
          ? "a snapshot with history of the failing rank (_record_memory_history(stacks=\"python\") before "
            "training; _dump_snapshot in the except handler)"
          : fmt::format("a snapshot with history of the failing rank, dumped by the OOM observer "
                        "(_record_memory_history(stacks=\"python\") before training; "
                        "torch._C._cuda_attach_out_of_memory_observer(lambda *a: "
                        "torch.cuda.memory._dump_snapshot(\"oom.pickle\"))): this OOM was raised inside the C "
                        "shim that AOTInductor-compiled models and extension ops on PyTorch's stable ABI call "
                        "through ({}), which hands it to Python as a RuntimeError that `except "
                        "torch.OutOfMemoryError` does not catch; the observer runs inside the allocator",
                        shim_oom),
      "step telemetry (steps.jsonl) of the failing rank",
      "one rerun with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True at the same memory"};
  return Verdict::kUndetermined;
}

/// The first snapshot with `oom` entries the run went on from (snapshot/survived_oom.h), or nullptr.
const SnapshotInput* snapshot_with_survived_ooms(const DoctorInputs& in) {
  for (const SnapshotInput& s : in.snapshots)
    if (s.survived.count > 0) return &s;
  return nullptr;
}

std::string survived_ooms_line(const SnapshotInput& s) {
  const snapshot::SurvivedOoms& o = s.survived;
  std::string line =
      fmt::format("no out-of-memory error the run died of: the {} `oom` entr{} of {} {} survived", o.count,
                  o.count == 1 ? "y" : "ies", s.path, o.count == 1 ? "was" : "were");
  if (o.caught_by_aten > 0)
    line += fmt::format(" ({}caught inside PyTorch at at::native::{}: cuDNN moves to a plan that needs less "
                        "workspace, perhaps a slower one)",
                        o.caught_by_aten == o.count ? "" : fmt::format("{} ", o.caught_by_aten), o.last_catcher);
  const std::size_t others = o.count - o.caught_by_aten;
  if (others > 0)
    line += fmt::format("{} followed by more requests for memory (the program caught {})",
                        o.caught_by_aten == 0 ? ": each was" : others == 1 ? "; the other was" : "; the others were",
                        o.caught_by_aten > 0 && others > 1 ? "them" : "it");
  return line;
}

/// `blind_snapshot`: snapshot_blind_to_oom(in).
void judge_healthy(const DoctorInputs& in, const InputPipelineFindings& pipeline, const TraceChoice& trace,
                   const RecordedCurve& curve, const std::string& blind_snapshot, Diagnosis& d) {
  std::uint64_t peak_reserved = 0, peak_allocated = 0;
  std::int64_t retries = -1;
  for (const auto& s : in.stats) {
    peak_reserved = std::max<std::uint64_t>(peak_reserved, s.stats.reserved_bytes.all.peak);
    peak_allocated = std::max<std::uint64_t>(peak_allocated, s.stats.allocated_bytes.all.peak);
    retries = std::max(retries, s.stats.num_alloc_retries);
  }
  for (const auto& t : in.telemetry) {
    peak_reserved = std::max(peak_reserved, telemetry_max(t.records, "reserved_bytes.all.peak"));
    peak_allocated = std::max(peak_allocated, telemetry_max(t.records, "allocated_bytes.all.peak"));
    retries = std::max<std::int64_t>(retries, static_cast<std::int64_t>(telemetry_max(t.records, "num_alloc_retries")));
  }
  if (trace.replay && !curve.reserved.empty()) {
    peak_reserved = std::max(peak_reserved, *std::max_element(curve.reserved.begin(), curve.reserved.end()));
    peak_allocated = std::max(peak_allocated, *std::max_element(curve.allocated.begin(), curve.allocated.end()));
  }
  if (!blind_snapshot.empty())
    d.healthy.push_back(fmt::format("no out-of-memory error in any input, though none could show one: {} holds no "
                                    "trace entries (history was off) and no log was given",
                                    blind_snapshot));
  else if (const SnapshotInput* s = snapshot_with_survived_ooms(in))
    d.healthy.push_back(survived_ooms_line(*s));
  else
    d.healthy.push_back("no out-of-memory error in any input");
  if (retries >= 0)
    d.healthy.push_back(
        retries == 0
            ? "0 cudaMalloc retries: the cache never had to be flushed to make room"
            : fmt::format("{} cudaMalloc retries: the cache was flushed {} times to make room — memory is tight",
                          retries, retries));
  if (peak_reserved > 0) {
    std::string line = fmt::format("peak reserved {} for peak allocated {}", format_bytes(peak_reserved),
                                   format_bytes(peak_allocated));
    if (peak_reserved >= peak_allocated)
      line += fmt::format(" ({} of cache above the live peak)", format_bytes(peak_reserved - peak_allocated));
    d.healthy.push_back(line);
  }
  std::optional<std::uint64_t> total;
  for (const SmiInput& smi : in.smi)
    for (const auto& s : smi.table.samples)
      if (s.memory_total) total = std::max(total.value_or(0), *s.memory_total);
  if (total && peak_reserved > 0 && *total > peak_reserved)
    d.healthy.push_back(fmt::format("margin: the device has {}; the peak reserved leaves {} ({} of the card)",
                                    format_bytes(*total), format_bytes(*total - peak_reserved),
                                    pct(static_cast<double>(*total - peak_reserved) / static_cast<double>(*total))));
  switch (pipeline.basis) {
    case PipelineBasis::kDataWait:
      d.healthy.push_back(fmt::format("the GPU rarely waits for data: {} of step time in the loader at steady state",
                                      pct(*pipeline.steady_wait_fraction)));
      break;
    case PipelineBasis::kSmiTrace:
      d.healthy.push_back(
          fmt::format("the GPU is busy: idle in {} of the nvidia-smi samples (no loader waits measured; "
                      "decided from the utilisation trace)",
                      pct(*pipeline.gpu_idle_fraction)));
      break;
    case PipelineBasis::kNothing:
      d.healthy.push_back("whether the GPU waits for data was not measured: give steps.jsonl (data_wait_ms) or an "
                          "nvidia-smi trace (-lms 100)");
      break;
  }
  if (!d.recommended_conf.empty() && !d.whatif.empty()) {
    const WhatIfLine* recorded = nullptr;
    const WhatIfLine* best = nullptr;
    for (const auto& w : d.whatif) {
      if (w.recorded) recorded = &w;
      if (w.conf == d.recommended_conf) best = &w;
    }
    if (recorded && best && best->comparable_peak_reserved_bytes() < recorded->comparable_peak_reserved_bytes())
      d.healthy.push_back(fmt::format(
          "headroom available: PYTORCH_CUDA_ALLOC_CONF={} would have peaked at {} reserved instead of {}", best->conf,
          format_bytes(best->comparable_peak_reserved_bytes()),
          format_bytes(recorded->comparable_peak_reserved_bytes())));
  }
}

}  // namespace

Diagnosis run_doctor(const DoctorInputs& in, const DoctorOptions& options) {
  if (!in.any()) {
    std::string what = in.unrecognised.empty()
                           ? std::string("no files given")
                           : fmt::format("{}, none recognised (first: {})",
                                         counted(in.unrecognised.size(), "file", "files"), in.unrecognised.front());
    if (!in.skipped.empty())
      what = fmt::format("{} skipped (first: {}: {}){}", in.skipped.size(), in.skipped.front().path,
                         in.skipped.front().reason, in.unrecognised.empty() ? "" : "; " + what);
    throw InputError("doctor: no usable input: " + what +
                     "; give snapshots, steps.jsonl, memory_stats JSON, nvidia-smi CSV, memory_summary text or a log "
                     "with the OOM message");
  }
  Diagnosis d;
  d.warnings = in.warnings;
  const OomSignals oom = gather_oom_signals(in);
  d.oom = oom.any();
  describe_inputs(in, d.oom, d);
  collect_ranks(in, oom, d);

  std::optional<int> focus_rank = oom.rank;
  if (!focus_rank)
    for (const RankFacts& r : d.ranks)
      if (r.oom) focus_rank = r.rank;
  const TraceChoice trace = choose_trace(in, focus_rank, d.oom);
  const TelemetryInput* telemetry = choose_telemetry(in, focus_rank);
  const auto smi = smi_summaries(in);
  InputPipelineOptions pipeline_options;
  pipeline_options.wait_threshold = options.data_wait_threshold;
  InputPipelineFindings pipeline = telemetry ? analyze_input_pipeline(telemetry->records, smi, pipeline_options)
                                             : analyze_input_pipeline({}, smi, pipeline_options);
  std::optional<int> waiting_rank;
  if (!d.oom) {  // without an OOM, the rank that waits longest for data decides
    for (const TelemetryInput& t : in.telemetry) {
      InputPipelineFindings other = analyze_input_pipeline(t.records, smi, pipeline_options);
      if (other.steady_wait_fraction.value_or(0) > pipeline.steady_wait_fraction.value_or(0)) {
        pipeline = std::move(other);
        if (pipeline.input_bound) waiting_rank = t.rank.value_or(0);
      }
    }
  }
  if (telemetry) {
    inputs::DataWaitSums all;  // summed file by file: joining the files copied every record
    for (const auto& t : in.telemetry) all.add(t.records);
    d.data_wait_fraction = all.fraction();
    d.steady_data_wait_fraction = pipeline.steady_wait_fraction;
  }
  d.gpu_idle_fraction = pipeline.gpu_idle_fraction;
  describe_rank_spread(d, waiting_rank);
  const TelemetryInput* shown = waiting_rank ? choose_telemetry(in, waiting_rank) : telemetry;
  if (shown) d.step_times = step_times_of(shown->records);

  RecordedCurve curve;
  if (trace.replay) {
    const auto events = trace.replay->snapshot.trace(trace.device);
    curve = walk_recorded_curve(trace.replay->snapshot, trace.device);
    d.timeline = timeline_of(curve, events, options.timeline_points);
    d.timeline_oom_index = trace.oom_index;
    if (telemetry)
      for (const AlignedStep& a : align_steps_to_trace(telemetry->records, events, curve)) {
        const inputs::StepRecord& r = telemetry->records[a.record];
        d.step_marks.push_back(
            {r.step, a.trace_index, r.phase_or_default(), r.optimizer_step.value_or(true), a.by_figures});
      }
    if (trace.oom_index) {
      const TraceUnits units = find_trace_units(trace.replay->snapshot, trace.device, *trace.oom_index);
      if (units.eval && units.eval_batch_start) d.failing_unit_start = units.eval_batch_start;
      else if (units.repeats()) d.failing_unit_start = units.starts.back();
    }
  }
  collect_smi_trace(in, oom.messages.empty() ? std::nullopt : oom.messages.front().gpu, d);
  if (trace.map) {
    const int device = trace.map->device;
    d.segment_map_at_oom = trace.map_oom_index.has_value();
    d.segment_map = d.segment_map_at_oom ? segment_map_at_event(trace.map->snapshot, device, *trace.map_oom_index)
                                         : metrics::build_segment_map(trace.map->snapshot, device);
  }

  std::string blind_snapshot;  // a snapshot given alone whose trace could not show an OOM (a healthy run's)
  if (d.oom) {
    for (const std::string& source : oom.sources) d.add_evidence("oom", "out of memory: " + source);
    d.oom_context = build_oom_context(in, oom, trace.replay, trace.device, trace.oom_index, curve, d);
    if (trace.replay && trace.oom_index) {
      d.verdict = judge_traced_oom(trace, telemetry, curve, options, d);
    } else {
      if (!d.oom_context->reserved_bytes || !d.oom_context->driver_free_bytes) {
        // no trace, no message figures: nothing to measure the capacity with
      } else {
        d.capacity_bytes = *d.oom_context->reserved_bytes + *d.oom_context->driver_free_bytes;
        d.capacity_source = "the OOM message: reserved by PyTorch + free on the device";
        if (const auto allowed = d.oom_context->allowed_bytes; allowed && *allowed < *d.capacity_bytes) {
          d.capacity_bytes = *allowed;
          d.capacity_source = "the OOM message: what the process may use (set_per_process_memory_fraction)";
        }
      }
      d.verdict = judge_oom_without_trace(in, d);
    }
    if (const std::string line = blind_spot_line(*d.oom_context); !line.empty()) d.add_evidence("blind_spot", line);
  } else if (!in.library_failures.empty()) {
    d.verdict = judge_library_failure(in, d);
  } else {
    d.phase = phase_name(JobPhase::kTrain);
    d.phase_source = in.telemetry.empty() ? "no OOM" : "no OOM; the telemetry covers the training steps";
    if (trace.replay && !trace.replay->snapshot.trace(trace.device).empty()) {
      const replay::PreparedTrace prepared =
          replay::prepare_trace(trace.replay->snapshot, trace.device, trace.replay->path, trace.replay->run_end());
      const replay::Capacity capacity = replay::resolve_capacity(prepared, {});
      if (capacity.bytes) {  // OOMs the run survived measured the device
        d.capacity_bytes = capacity.bytes;
        d.capacity_source = capacity.source;
      }
      replay::WhatIfOptions whatif_options;
      whatif_options.threads = options.threads;
      whatif_options.progress = options.progress;
      fill_whatif(replay::sweep_at_capacity(prepared, capacity, whatif_options), d);
    }
    if (pipeline.data_wait_fraction)
      d.add_evidence("data_wait_fraction",
                     fmt::format("data wait {} of step time over {} steps ({} without the first step, whose {:.0f} ms "
                                 "wait is the loader starting up)",
                                 pct(*pipeline.data_wait_fraction), pipeline.steps,
                                 pct(pipeline.steady_wait_fraction.value_or(0)), pipeline.first_wait_ms.value_or(0)));
    if (pipeline.gpu_idle_fraction)
      d.add_evidence(
          "gpu_idle",
          fmt::format(
              "nvidia-smi trace: the GPU is idle (utilization below 10%) in {} of the samples while the job runs, "
              "mean utilization {:.0f}%",
              pct(*pipeline.gpu_idle_fraction), pipeline.gpu_utilization_mean.value_or(0)));
    if (pipeline.input_bound) {
      d.verdict = Verdict::kInputBound;
      d.add_evidence("input_bound",
                     fmt::format("steady-state data wait {} ≥ the {} threshold: median step waits {:.1f} ms for data "
                                 "and computes {:.1f} ms",
                                 pct(*pipeline.steady_wait_fraction), pct(options.data_wait_threshold),
                                 pipeline.median_wait_ms.value_or(0), pipeline.median_compute_ms.value_or(0)));
    } else if (pipeline.idle_unexplained) {
      d.verdict = Verdict::kUndetermined;
      d.decide_with.push_back(fmt::format(
          "step telemetry with data_wait_ms (steps.jsonl from the fragscope hook): the GPU idles in {} of the "
          "nvidia-smi samples, and only the loader's waits tell whether it waits for data or for something else "
          "(communication, the CPU, checkpoints)",
          pct(*pipeline.gpu_idle_fraction)));
    } else {
      d.verdict = Verdict::kOk;
      blind_snapshot = snapshot_blind_to_oom(in);
      judge_healthy(in, pipeline, trace, curve, blind_snapshot, d);
    }
  }

  switch (d.verdict) {
    case Verdict::kCapacity:
      d.headline = fmt::format("The job needs more memory than the device gives it{}; {}.",
                               d.phase.empty() || d.in_phase(JobPhase::kUnknown) ? ""
                                                                                   : " in its " + d.phase + " phase",
                               d.expandable_fails_at_oom ? "expandable segments fail at the same malloc"
                               : d.run_growth.grows()
                                   ? fmt::format("it keeps {} more at every {}, and no allocator setting fixes that",
                                                 format_bytes(d.run_growth.per_step_bytes),
                                                 d.run_growth.eval_batches ? "eval batch" : "step")
                                   : "no allocator setting fixes it");
      break;
    case Verdict::kFragmentation:
      d.headline = d.setting_fixes_it
                       ? "The memory was there but not in one piece: an allocator setting would have run it."
                       : "The memory was there but not in one piece, and no allocator setting undoes the pieces "
                         "already made: smaller steps, or a setting from the job's start, will.";
      break;
    case Verdict::kInputBound:
      d.headline = "The GPU waits for data: the input pipeline, not the GPU, limits the run.";
      break;
    case Verdict::kUndetermined:
      if (d.library_failure) {
        std::string library = d.library_failure->library;
        if (library.starts_with("the ")) library.front() = 'T';  // "the CUDA runtime" opens the sentence
        d.headline = fmt::format("{} could not get device memory of its own, outside PyTorch's allocator; the data "
                                 "cannot decide why; see what would decide it.",
                                 library);
        break;
      }
      if (!d.oom) {
        d.headline = fmt::format("No OOM, but the GPU idles in {} of the nvidia-smi samples and no step telemetry says "
                                 "whether it waits for data.", pct(pipeline.gpu_idle_fraction.value_or(0)));
        break;
      }
      d.headline =
          d.in_phase(JobPhase::kUnknown) || d.phase.empty()
              ? "The data cannot decide why the run ran out of memory; see what would decide it."
              : fmt::format("The data cannot decide why the {} phase ran out of memory; see what would decide it.",
                            d.phase);
      break;
    case Verdict::kOk:
      if (!blind_snapshot.empty()) {
        d.headline = "No OOM in the inputs, but none of them could show one: the snapshot has no trace (history was "
                     "off) and no log was given. If the job failed, give its log.";
        break;
      }
      if (const SnapshotInput* s = snapshot_with_survived_ooms(in)) {
        const bool one = s->survived.count == 1;
        d.headline = fmt::format("No OOM the run died of: the run went on from the {} out-of-memory error{} its "
                                 "snapshot records{}.",
                                 s->survived.count, one ? "" : "s",
                                 s->survived.caught_by_aten != s->survived.count
                                     ? ""
                                     : fmt::format(" (PyTorch's cuDNN convolution caught {} and tried another plan)",
                                                   one ? "it" : "them"));
        break;
      }
      d.headline =
          pipeline.basis == PipelineBasis::kNothing
              ? "No OOM. Whether the GPU waits for data was not measured (no step telemetry, no nvidia-smi trace)."
              : "Nothing wrong: no OOM and the GPU is not waiting for data.";
      break;
  }
  // Only a setting that runs the failing step is recommended: not one that merely passes the
  // failing malloc when the step needs more than the device (capacity) or cannot be told.
  if (d.verdict == Verdict::kCapacity || d.verdict == Verdict::kUndetermined) d.recommended_conf.clear();
  rank_actions(d);
  return d;
}

}  // namespace fragscope::diagnose

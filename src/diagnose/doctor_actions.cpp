#include "diagnose/doctor_actions.h"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "inputs/library_alloc_failure.h"
#include "util/bytes.h"

namespace fragscope::diagnose {
namespace {

std::string pct(double fraction) { return fmt::format("{:.0f}%", 100.0 * fraction); }

const WhatIfLine* line_for(const Diagnosis& d, const std::string& conf) {
  for (const WhatIfLine& line : d.whatif)
    if (line.conf == conf) return &line;
  return nullptr;
}

const WhatIfLine* recorded_line(const Diagnosis& d) {
  for (const WhatIfLine& line : d.whatif)
    if (line.recorded) return &line;
  return nullptr;
}

/// What the failing step needs, from whichever projection ran: its peak with what the steps
/// after it hold again, what was live when it began (kept across steps) and the rest.
struct Needs {
  bool known = false;
  std::uint64_t needed = 0;
  std::uint64_t held = 0;
  std::uint64_t activations = 0;
};

Needs needs_of(const Diagnosis& d) {
  Needs n;
  if (const StepProjection& p = d.projection; p.available) {
    n = {true, p.next_step_peak_bytes, p.static_bytes + p.returning_bytes,
         p.projected_peak_bytes > p.static_bytes ? p.projected_peak_bytes - p.static_bytes : 0};
  } else if (const TraceStepProjection& t = d.trace_projection; t.available && t.from_training_call) {
    n = {true, t.most_peak_bytes, t.start_level_bytes,
         t.most_peak_bytes > t.start_level_bytes ? t.most_peak_bytes - t.start_level_bytes : 0};
  } else if (t.available) {
    n = {true, t.projected_peak_bytes + t.next_unit_extra_bytes, t.start_level_bytes + t.next_unit_extra_bytes,
         t.projected_peak_bytes > t.start_level_bytes ? t.projected_peak_bytes - t.start_level_bytes : 0};
  }
  return n;
}

void never_buy(Diagnosis& d, const std::string& why) {
  d.do_not.push_back({"Do not buy more GPUs for this", "", why, false});
}

void never_buy_or_slice(Diagnosis& d, const std::string& why) {
  d.do_not.push_back({"Do not enable MIG", "",
                      "a MIG slice gives each process a fraction of the GPU's memory, never more: "
                      "every OOM gets closer, none goes away",
                      false});
  never_buy(d, why);
}

/// The reductions the snapshot shows (memory_advice.h), largest first. Under capacity one is
/// enough on its own when it frees more than the step is short by; in a run that grows, only keeping less per step.
void snapshot_reductions(Diagnosis& d, bool capacity) {
  const Needs n = needs_of(d);
  const std::uint64_t cap = d.capacity_bytes.value_or(0);
  const std::uint64_t short_by = n.known && n.needed > cap ? n.needed - cap : 0;
  for (const MemoryAdvice& a : d.memory_advice) {
    std::string evidence = a.evidence;
    if (short_by > 0) evidence += fmt::format("; the step is {} short", format_bytes(short_by));
    const bool stops_growth = !d.run_growth.grows() || a.key == "kept_per_step";
    d.actions.push_back(
        {a.title, a.setting, evidence, capacity && short_by > 0 && a.bytes > short_by && stops_growth});
  }
}

void memory_reduction_actions(Diagnosis& d, bool sufficient) {
  const Needs n = needs_of(d);
  const std::uint64_t cap = d.capacity_bytes.value_or(0);
  std::string shortfall =
      n.known && cap > 0 && n.needed > cap
          ? fmt::format("the step needs {} where the device gives {}; {} of it is activations that scale with tokens",
                        format_bytes(n.needed), format_bytes(cap), format_bytes(n.activations))
          : "activation memory grows with the tokens of a micro-step";
  d.actions.push_back({"Turn on activation checkpointing",
                       "model.gradient_checkpointing_enable()  # or torch.utils.checkpoint per block",
                       shortfall + "; checkpointing keeps one activation per layer boundary instead of all of them",
                       sufficient});
  std::string halve = "halving the micro-batch halves the activation part of the peak";
  if (n.known && cap > 0) {
    const std::uint64_t halved = n.held + n.activations / 2;
    halve = fmt::format("halving the micro-batch brings the projected peak from {} to about {} ({} the {} capacity){}",
                        format_bytes(n.needed), format_bytes(halved), halved <= cap ? "within" : "still above",
                        format_bytes(cap), d.run_growth.grows() ? " at the next step; the run still grows" : "");
  }
  d.actions.push_back({"Keep the global batch: halve the micro-batch and double gradient accumulation",
                       "micro_batch_size //= 2; gradient_accumulation_steps *= 2", halve, sufficient});
  if (!d.trigger.empty() && d.trigger.find("longest batch") != std::string::npos)
    d.actions.push_back({"Bound the tokens of a micro-step",
                         "cap max_seq_len, or bucket / pack sequences so every micro-step has about the same tokens",
                         d.trigger + ": the peak follows the longest batch, not the average", sufficient});
}

void allocator_action(Diagnosis& d, bool sufficient, const std::string& evidence) {
  if (d.recommended_conf.empty()) return;
  d.actions.push_back(
      {"Change the allocator setting", "PYTORCH_CUDA_ALLOC_CONF=" + d.recommended_conf, evidence, sufficient});
}

/// Fragmentation that the trace's starting state already holds: no setting of the sweep helps.
void stranded_fragmentation(Diagnosis& d) {
  memory_reduction_actions(d, true);
  snapshot_reductions(d, false);
  d.actions.push_back(
      {"Set the allocator from the job's start", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
       "expandable segments map pages on demand and leave no split segments behind; the replay cannot show "
       "it: the trace begins after the pieces were made",
       false});
  d.actions.push_back(
      {"Allocate long-lived tensors before the loop", "create buffers, caches and optimizer state once, up front",
       "a small tensor that outlives the step pins the segment it was carved from; its free neighbours can "
       "then serve only smaller requests",
       false});
  never_buy_or_slice(d, "the memory was there; it was in pieces");
}

void fragmentation(Diagnosis& d) {
  if (!d.setting_fixes_it) {
    stranded_fragmentation(d);
    return;
  }
  const WhatIfLine* best = line_for(d, d.recommended_conf);
  const WhatIfLine* recorded = recorded_line(d);
  const Needs n = needs_of(d);
  std::string evidence = "the replay at the same capacity passes the point where the real run failed";
  if (const TraceStepProjection& t = d.trace_projection; best && t.available && t.from_training_call)
    evidence = fmt::format(
        "the eval batch, projected from the training's {} call, runs under it at the same {} less the "
        "projection's margin of {:.1f}% (it needs at most {} live with perfect packing)",
        t.shared_function, format_bytes(d.capacity_bytes.value_or(0)), 100.0 * t.margin_to_fit, format_bytes(n.needed));
  else if (best && t.available)
    evidence = fmt::format(
        "the failing step, projected from the trace's earlier steps, runs under it at the same {} less the "
        "projection's margin of {:.1f}% (it needs {} live with perfect packing)",
        format_bytes(d.capacity_bytes.value_or(0)), 100.0 * t.margin_to_fit, format_bytes(n.needed));
  else if (best && recorded)
    evidence = fmt::format(
        "replayed at the same {}: passes the recorded OOM (peak reserved {} vs {} under the recorded config); "
        "the step's projected peak {} fits",
        format_bytes(d.capacity_bytes.value_or(0)),
        format_bytes(best->peak_reserved_at_capacity_bytes.value_or(best->peak_reserved_bytes)),
        format_bytes(recorded->peak_reserved_at_capacity_bytes.value_or(recorded->peak_reserved_bytes)),
        format_bytes(n.needed));
  allocator_action(d, true, evidence);
  // Where every earlier unit the failing one aligns with had its size (field moco_lo: MoCo's fixed images), there
  // is no longer batch to keep a margin for.
  const TraceStepProjection& t = d.trace_projection;
  const bool sizes_vary = !t.available || t.aligned_units == 0 || t.varying_units > 0;
  if (n.known && d.capacity_bytes && sizes_vary) {
    const std::uint64_t spare = *d.capacity_bytes - std::min(*d.capacity_bytes, n.needed);
    d.actions.push_back(
        {"Keep a margin for longer batches", "activation checkpointing, or cap max_seq_len",
         fmt::format("with perfect packing only {} would be left at the failing step: a longer batch can still OOM",
                     format_bytes(spare)),
         false});
  }
  snapshot_reductions(d, false);
  // Only for a job seen emptying the cache more than once: advice to stop what it does not do would be noise.
  if (d.cache_empties.calls >= 2)
    d.actions.push_back(
        {"Release the cache only at phase boundaries",
         "torch.cuda.empty_cache()  # between train and eval, not per step",
         fmt::format("the job called torch.cuda.empty_cache() {} times in the trace ({} released, the last at {}); "
                     "cached blocks of one phase's sizes do not fit the next phase's, and emptying per step only "
                     "adds cudaMalloc time",
                     d.cache_empties.calls, format_bytes(d.cache_empties.released_bytes),
                     d.cache_empties.frame.empty() ? "a frame outside Python" : d.cache_empties.frame),
         false});
  d.do_not.push_back({"Do not buy memory for this", "",
                      "the replay shows the same device runs the step with another allocator setting", false});
  // A setting of the sweep that still runs out of memory at the same capacity, the most
  // memory-hungry of them (the table lists them by their demand).
  const WhatIfLine* worst = nullptr;
  for (const WhatIfLine& line : d.whatif)
    if (!line.recorded && &line != best && (line.oom_event || line.runs_projected_step == false)) worst = &line;
  if (worst)
    d.do_not.push_back({"Do not reach for " + (worst->conf.empty() ? std::string("the defaults") : worst->conf), "",
                        worst->oom_event ? fmt::format("at the same capacity it still runs out of memory at event {}",
                                                       *worst->oom_event)
                                         : "at the same capacity it runs out of memory in the projected step",
                        false});
  never_buy_or_slice(d, "the memory was there; it was in pieces");
}

bool advised(const Diagnosis& d, std::string_view key) {
  return std::any_of(d.memory_advice.begin(), d.memory_advice.end(),
                     [&](const MemoryAdvice& a) { return a.key == key; });
}

void capacity(Diagnosis& d) {
  snapshot_reductions(d, true);
  if (d.in_phase(JobPhase::kEval)) {
    if (!advised(d, "eval_batch"))
      d.actions.push_back({"Evaluate in smaller or chunked batches",
                           "eval_batch_size //= 2 (or loop over chunks of the eval batch)",
                           "the eval pass's peak scales with its batch × sequence length", true});
    if (!advised(d, "fp32_logits"))
      d.actions.push_back({"Do not materialise full fp32 logits",
                           "compute the loss per chunk of the sequence; avoid logits.float() on the whole batch",
                           "vocab-sized logits dominate an eval pass: batch × seq × vocab × 4 bytes in fp32", true});
  } else if (d.in_phase(JobPhase::kOptimizer)) {
    d.actions.push_back(
        {"Step the optimizer without foreach temporaries",
         "torch.optim.AdamW(params, ..., foreach=False)  # or fused=True",
         "the foreach step allocates a result per parameter on top of the optimizer's state; one parameter "
         "at a time needs one parameter's worth",
         true});
    d.actions.push_back({"Shard the optimizer state", "FSDP (fully_shard) or ZeRO-1 across the data-parallel ranks",
                         "AdamW keeps two fp32 tensors per parameter: sharded over N ranks each holds 1/N of them",
                         true});
  } else {
    // A run that grows outgrows smaller steps too, later: only keeping less per step is enough.
    memory_reduction_actions(d, !d.run_growth.grows());
  }
  const Needs n = needs_of(d);
  d.do_not.push_back({"Do not expect an allocator setting to fix it", "",
                      d.expandable_fails_at_oom
                          ? "replayed from the job's start at the same memory, expandable segments fail at the same "
                            "malloc as the run did, and no setting is shown to run the rest of the pass"
                      : n.known && n.needed > d.capacity_bytes.value_or(0)
                          ? fmt::format("with perfect packing (no fragmentation at all) the steps still need about {}, "
                                        "more than the {} the device gives",
                                        format_bytes(n.needed), format_bytes(d.capacity_bytes.value_or(0)))
                      : n.known
                          ? fmt::format("with perfect packing the steps need about {} of the {} the device gives, and "
                                        "no setting of the sweep runs them: what a real allocator needs above the live "
                                        "bytes does not fit",
                                        format_bytes(n.needed), format_bytes(d.capacity_bytes.value_or(0)))
                          : "the ideal packer (no fragmentation at all) still needs more than the device gives",
                      false});
  never_buy_or_slice(d,
                     "data-parallel GPUs each hold the full per-rank memory: only sharding (FSDP / ZeRO) or smaller "
                     "micro-steps lower it");
}

void undetermined(Diagnosis& d) {
  snapshot_reductions(d, false);
  if (d.in_phase(JobPhase::kEval)) {
    if (!advised(d, "eval_batch"))
      d.actions.push_back(
          {"Try smaller or chunked eval batches", "eval_batch_size //= 2 (or loop over chunks of the eval batch)",
           "the eval pass's peak is not in the trace; this lowers it, by an amount the data cannot tell", false});
    d.actions.push_back({"Release training's cache before eval",
                         "torch.cuda.empty_cache()  # once, at the train → eval boundary",
                         "cached blocks sized for training steps may not fit eval's tensors", false});
  } else {
    memory_reduction_actions(d, false);
  }
  d.do_not.push_back(
      {"Do not call it fragmentation because reserved-but-unallocated is large", "",
       d.oom_context && d.oom_context->reserved_unallocated
           ? fmt::format("{} was cached and unallocated, yet that says nothing about what the rest of the pass needs",
                         format_bytes(*d.oom_context->reserved_unallocated))
           : "cached memory at the OOM says nothing about what the rest of the pass needs",
       false});
  never_buy_or_slice(d, "first decide whether the phase fits at all (see what would decide it)");
}

void input_bound(Diagnosis& d) {
  const std::string wait = d.steady_data_wait_fraction ? pct(*d.steady_data_wait_fraction) : std::string("most");
  const std::string idle =
      d.gpu_idle_fraction ? fmt::format("; nvidia-smi shows the GPU idle in {} of samples", pct(*d.gpu_idle_fraction))
                          : "";
  d.actions.push_back({"Run more loader workers",
                       "DataLoader(num_workers=min(os.cpu_count() // gpus_per_node, 16), persistent_workers=True)",
                       fmt::format("the GPU waits for data {} of the step time{}", wait, idle), true});
  d.actions.push_back({"Prefetch and pin",
                       "DataLoader(prefetch_factor=4, pin_memory=True); tensor.to(device, non_blocking=True)",
                       "keeps batches ready ahead of the GPU and overlaps the host-to-device copy", true});
  d.actions.push_back({"Pre-tokenize into shards",
                       "tokenize once offline; read token-id shards (e.g. numpy memmap / webdataset)",
                       "per-sample CPU work (tokenising, decoding) is what the workers spend their time on", false});
  never_buy(d, fmt::format("more GPUs do not fix idle time: each waits for data {} of the time already", wait));
}

void ok(Diagnosis& d) {
  const WhatIfLine* best = line_for(d, d.recommended_conf);
  const WhatIfLine* recorded = recorded_line(d);
  if (best && recorded && best->comparable_peak_reserved_bytes() < recorded->comparable_peak_reserved_bytes() &&
      !best->recorded)
    d.actions.push_back({"Optional: lower the reserved peak", "PYTORCH_CUDA_ALLOC_CONF=" + d.recommended_conf,
                         fmt::format("the replay peaks at {} reserved instead of {}: headroom for longer batches",
                                     format_bytes(best->comparable_peak_reserved_bytes()),
                                     format_bytes(recorded->comparable_peak_reserved_bytes())),
                         true});
  d.do_not.push_back({"Do not call torch.cuda.empty_cache() every step", "",
                      "it only adds cudaMalloc/cudaFree time; the cache is healthy", false});
}

/// A CUDA library's own allocation failed (library_failure.h): room for the library, or less to hold.
void library_failure(Diagnosis& d) {
  const std::string& library = d.library_failure->library;
  d.actions.push_back(
      {"Leave the CUDA libraries room: cap PyTorch's allocator below the device",
       "free, total = torch.cuda.mem_get_info(); torch.cuda.set_per_process_memory_fraction((free - 2**29) / total)"
       "  # at the start, before the first batch",
       fmt::format("{} allocates outside PyTorch's allocator, which does not give its cache back for it; capped "
                   "512 MiB below what the device had free at the start (the CUDA context and other processes "
                   "already counted), PyTorch raises its own OOM (after freeing its cache and retrying) before the "
                   "library runs out",
                   library),
       false});
  if (library == inputs::kNcclLibrary)
    d.actions.push_back({"Create NCCL's communicators and connections before memory fills",
                         "dist.init_process_group(\"nccl\", device_id=torch.device(\"cuda\", local_rank)); then one "
                         "training step on a batch of 1 before training",
                         "NCCL allocates a communicator's buffers when it is created (at its first collective unless "
                         "init_process_group is given device_id) and a connection's when two ranks first exchange "
                         "data (send/recv, all_to_all), outside PyTorch's allocator; made while the device is "
                         "empty, they are in place when activations fill it",
                         false});
  else
    d.actions.push_back({"Create the libraries' handles before memory fills",
                         "one forward and backward on a batch of 1 before training",
                         "cuBLAS and cuDNN create a handle per thread at its first call and keep it; autograd's "
                         "thread makes its own at the first backward, when the forward's activations are live",
                         false});
  memory_reduction_actions(d, false);
  never_buy_or_slice(d, "first find what held the memory when the library failed (see what would decide it)");
}

// No OOM, and the GPU idles without a measure of why: measure before changing anything.
void idle_unexplained(Diagnosis& d) {
  d.actions.push_back(
      {"Record the loader's wait time for each step",
       "for batch in mon.loader(train_loader): with mon.step(batch): ...  (fragscope.torch.Monitor, docs/monitor.md)",
       "the nvidia-smi trace shows the GPU idle but not what it waits for", false});
  d.do_not.push_back({"Do not add data-loader workers on the idle share alone", "",
                      "an idle GPU may be waiting for communication, the CPU or checkpoints; the loader waits tell",
                      false});
}

}  // namespace

void rank_actions(Diagnosis& d) {
  d.actions.clear();
  d.do_not.clear();
  switch (d.verdict) {
    case Verdict::kFragmentation: fragmentation(d); break;
    case Verdict::kCapacity: capacity(d); break;
    case Verdict::kUndetermined:
      if (d.oom) undetermined(d);
      else if (d.library_failure) library_failure(d);
      else idle_unexplained(d);
      break;
    case Verdict::kInputBound: input_bound(d); break;
    case Verdict::kOk: ok(d); break;
  }
}

}  // namespace fragscope::diagnose

#include "diagnose/memory_advice.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "diagnose/optimizer_code.h"
#include "diagnose/python_frames.h"
#include "util/bytes.h"

namespace fragscope::diagnose {
namespace {

enum Site : std::uint8_t { kOther, kKvCache, kLoss, kForeach, kSiteCount };

/// Allocated under a function of the program (outside torch) that names evaluation.
bool under_evaluation(const snapshot::Snapshot& snapshot, snapshot::StackId stack) {
  for (const snapshot::FrameId frame : python_frames(snapshot, stack)) {
    const snapshot::Frame& f = snapshot.stacks.frame(frame);
    if (torch_path(snapshot.strings.view(f.filename)).empty() && names_evaluation(snapshot.strings.view(f.name)))
      return true;
  }
  return false;
}

/// The torch.optim class whose module ("optim/sgd.py") runs a foreach step, whether it has a fused kernel for
/// CUDA tensors (Adam, AdamW and SGD do; the others step per parameter with foreach=False), and whether its step
/// function makes its state (SGD clones each gradient into its momentum buffer on the first step; the others make
/// their state in `_init_group`).
struct OptimizerClass {
  std::string_view module, name;
  bool fused;
  bool state_in_step = false;
};
constexpr std::array kOptimizerClasses{
    OptimizerClass{"optim/adamw.py", "AdamW", true},       OptimizerClass{"optim/adam.py", "Adam", true},
    OptimizerClass{"optim/sgd.py", "SGD", true, true},     OptimizerClass{"optim/adagrad.py", "Adagrad", false},
    OptimizerClass{"optim/adamax.py", "Adamax", false},    OptimizerClass{"optim/nadam.py", "NAdam", false},
    OptimizerClass{"optim/radam.py", "RAdam", false},      OptimizerClass{"optim/rmsprop.py", "RMSprop", false},
    OptimizerClass{"optim/rprop.py", "Rprop", false},      OptimizerClass{"optim/asgd.py", "ASGD", false},
    OptimizerClass{"optim/adadelta.py", "Adadelta", false},
};

/// The class of the foreach step that made `stack`'s block, when its module is one of torch.optim's.
std::optional<OptimizerClass> foreach_optimizer(const snapshot::Snapshot& snapshot, snapshot::StackId stack) {
  for (const snapshot::FrameId frame : python_frames(snapshot, stack)) {
    const std::string_view inside = torch_path(snapshot.strings.view(snapshot.stacks.frame(frame).filename));
    for (const OptimizerClass& c : kOptimizerClasses)
      if (inside == c.module) return c;
  }
  return std::nullopt;
}

Site site_of(const snapshot::Snapshot& snapshot, snapshot::StackId stack) {
  for (const snapshot::FrameId frame : python_frames(snapshot, stack)) {
    const snapshot::Frame& f = snapshot.stacks.frame(frame);
    const std::string_view file = snapshot.strings.view(f.filename);
    const std::string_view name = snapshot.strings.view(f.name);
    const std::string_view inside = torch_path(file);
    if (file.ends_with("transformers/cache_utils.py")) return kKvCache;
    if (file.ends_with("transformers/loss/loss_utils.py")) return kLoss;
    if (inside == "nn/functional.py" && (name == "cross_entropy" || name == "log_softmax")) return kLoss;
    if (inside.starts_with("optim/") && name != "_init_group" &&
        (name.find("_multi_tensor") != std::string_view::npos || name.find("foreach") != std::string_view::npos))
      return kForeach;
  }
  return kOther;
}

}  // namespace

std::vector<MemoryAdvice> memory_advice(const snapshot::Snapshot& snapshot, int device, std::size_t oom_index,
                                        const std::unordered_map<std::uint64_t, std::size_t>& live,
                                        const TraceUnits& units, const RunGrowth& growth,
                                        std::uint64_t capacity_bytes) {
  const auto trace = snapshot.trace(device);
  // The optimizer step the OOM is in: the run of allocations by torch/optim code that ends at it (none when the
  // OOM is elsewhere). A foreach block live from before it outlived its step: state (SGD's momentum), not a
  // temporary.
  const std::size_t step_start = optimizer_step_start(snapshot, trace, oom_index).value_or(oom_index + 1);
  std::uint64_t foreach_state = 0;
  std::unordered_map<snapshot::StackId, Site> sites;
  std::unordered_map<snapshot::StackId, bool> eval_stacks;
  std::array<std::uint64_t, kSiteCount> by_site{};
  std::uint64_t earlier_eval = 0, this_eval = trace[oom_index].size;
  const auto count = [&](std::size_t event) {
    const snapshot::TraceEvent& e = trace[event];
    auto [it, added] = sites.try_emplace(e.stack, kOther);
    if (added && e.stack != 0) it->second = site_of(snapshot, e.stack);
    if (it->second == kForeach && event < step_start)
      foreach_state += e.size;
    else
      by_site[it->second] += e.size;
  };
  for (const auto& [address, event] : live) {
    count(event);
    if (!units.eval_batch_start) continue;
    if (event >= *units.eval_batch_start) {
      this_eval += trace[event].size;
    } else {
      auto [it, added] = eval_stacks.try_emplace(trace[event].stack, false);
      if (added && trace[event].stack != 0) it->second = under_evaluation(snapshot, trace[event].stack);
      if (it->second) earlier_eval += trace[event].size;
    }
  }
  count(oom_index);
  // The optimizer the foreach temporaries belong to: its fused kernel, or its per-parameter loop.
  std::optional<OptimizerClass> optimizer;
  for (const auto& [stack, site] : sites)
    if (site == kForeach && !optimizer) optimizer = foreach_optimizer(snapshot, stack);
  const std::string optimizer_name = optimizer ? std::string(optimizer->name) : "AdamW";
  const bool fused = !optimizer || optimizer->fused;
  // A step that makes its state, with none from before it: its first step, whose foreach blocks are that state.
  if (optimizer && optimizer->state_in_step && foreach_state == 0) by_site[kForeach] = 0;

  std::vector<MemoryAdvice> advice;
  const std::uint64_t least = std::max<std::uint64_t>(64 * kMiB, capacity_bytes / 100);
  const auto offer = [&](std::uint64_t bytes, MemoryAdvice a) {
    if (bytes < least) return;
    a.bytes = bytes;
    advice.push_back(std::move(a));
  };
  const std::string made_at = growth.frame.empty() ? "a call stack without Python frames" : growth.frame;
  if (growth.grows() && growth.regrown)
    offer(growth.kept_bytes,
          {"kept_per_step", "Stop remaking a larger tensor every step",
           "allocate it once at its final size and fill it in place (a static KV cache: transformers' "
           "cache_implementation=\"static\"), or run fewer tokens or prompts at a time",
           fmt::format("the memory live at each {}'s start rose by {} or more for the last {}, {} in all, remade at "
                       "{} (torch.cat makes a new, larger tensor and frees the old one): the run grows until it "
                       "fails, whatever the allocator setting",
                       growth.eval_batches ? "eval batch" : "step", format_bytes(growth.per_step_bytes), growth.steps,
                       format_bytes(growth.kept_bytes), made_at),
           0});
  else if (growth.grows())
    offer(growth.kept_bytes,
          {"kept_per_step",
           growth.eval_batches ? "Stop keeping each eval batch's outputs on the GPU"
                               : "Stop keeping each step's tensors on the GPU",
           growth.eval_batches
               ? "validate under torch.no_grad() (a running sum of losses keeps every batch's graph), and move the "
                 "outputs kept for the epoch's metrics to the CPU (t.cpu()) or reduce them per batch"
               : "move what the run keeps to the CPU (t.detach().cpu()) or reduce it each step (loss.item(), running "
                 "sums)",
           fmt::format("the run's earlier {} left {} live at the OOM, {} or more every one for the last {}, made at "
                       "{}: the run grows until it fails, whatever the allocator setting",
                       growth.eval_batches ? "eval batches" : "steps", format_bytes(growth.kept_bytes),
                       format_bytes(growth.per_step_bytes), growth.steps,
                       made_at),
           0});
  if (!units.eval)
    offer(by_site[kKvCache],
          {"kv_cache", "Turn off the KV cache in training",
           "model.config.use_cache = False  # or model(..., use_cache=False)",
           fmt::format("transformers' DynamicCache holds {} of keys and values at the OOM; a training step never "
                       "reads them back",
                       format_bytes(by_site[kKvCache])),
           0});
  offer(by_site[kLoss],
        {"fp32_logits", "Compute the loss without full fp32 logits",
         "a fused or chunked cross-entropy (e.g. Liger Kernel's fused linear cross-entropy for a language "
         "model's head, or the loss over chunks of the batch)",
         fmt::format("{} of fp32 logits and their log-softmax (a score per class for every token or pixel, 4 "
                     "bytes each) is live at the OOM",
                     format_bytes(by_site[kLoss])),
         0});
  offer(by_site[kForeach],
        {"foreach_temporaries", fused ? "Step the optimizer fused" : "Step the optimizer one parameter at a time",
         fmt::format("torch.optim.{}(params, ..., {})", optimizer_name, fused ? "fused=True" : "foreach=False"),
         fmt::format("the foreach optimizer step holds {} of temporaries at the OOM on top of its state; {}",
                     format_bytes(by_site[kForeach]),
                     fused ? std::string("the fused kernel makes none")
                           : fmt::format("without foreach it makes them one parameter at a time ({} has no fused "
                                         "kernel)",
                                         optimizer_name)),
         0});
  if (!growth.grows())  // else kept_per_step names them, with words not only for HF's Trainer
    offer(earlier_eval,
        {"eval_outputs", "Keep eval outputs off the GPU",
         "TrainingArguments(eval_accumulation_steps=1)  # or prediction_loss_only=True when only the loss is needed",
         fmt::format("{} that earlier eval batches left on the GPU is live at the OOM (HF's Trainer concatenates "
                     "predictions on the device until eval_accumulation_steps)",
                     format_bytes(earlier_eval)),
         0});
  if (units.eval_batch_start)
    offer(this_eval, {"eval_batch", "Evaluate in smaller batches",
                      "TrainingArguments(per_device_eval_batch_size=...)  # half the current one",
                      fmt::format("the failing eval batch holds {} at the OOM; half the batch holds about half",
                                  format_bytes(this_eval)),
                      0});
  std::sort(advice.begin(), advice.end(),
            [](const MemoryAdvice& a, const MemoryAdvice& b) { return a.bytes > b.bytes; });
  return advice;
}

}  // namespace fragscope::diagnose

#include "diagnose/oom_phase.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include <fmt/format.h>

#include "diagnose/name_words.h"
#include "util/counted.h"
#include "util/shown_text.h"

namespace fragscope::diagnose {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::optional<JobPhase> phase_named_by(std::string_view name) {
  const std::string n = lower(name);
  if (n.find("optimizer.step") != std::string::npos) return JobPhase::kOptimizer;
  if (has_word_beginning_with(name, {"eval", "valid", "inference", "generate"})) return JobPhase::kEval;
  if (has_word_beginning_with(name, {"checkpoint", "save", "state_dict"})) return JobPhase::kCheckpoint;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> open_annotation(const snapshot::Snapshot& snapshot, int device, std::int64_t time_us) {
  std::vector<std::string> open;
  for (const snapshot::Annotation& a : snapshot.annotations) {
    if (a.device != device || a.time_us > time_us) continue;
    const std::string_view name = snapshot.strings.view(a.name);
    if (a.stage == snapshot::AnnotationStage::kStart) {
      open.emplace_back(name);
    } else if (a.stage == snapshot::AnnotationStage::kEnd) {
      const auto it = std::find(open.rbegin(), open.rend(), name);
      if (it != open.rend()) open.erase(std::next(it).base());
    }
  }
  if (open.empty()) return std::nullopt;
  return open.back();
}

OomPhase decide_oom_phase(const snapshot::Snapshot* snapshot, int device, std::optional<std::size_t> oom_index,
                          const OomCallPath* call_path, std::span<const inputs::StepRecord> steps) {
  OomPhase result;
  if (snapshot && oom_index) {
    const auto trace = snapshot->trace(device);
    if (const auto name = open_annotation(*snapshot, device, trace[*oom_index].time_us)) {
      const auto phase = phase_named_by(*name);
      // Lightning and other trainers run the forward and backward pass as the closure of
      // optimizer.step(closure): the annotation is open, the failing malloc is not the optimizer's.
      const bool closure = phase == JobPhase::kOptimizer && call_path && call_path->has_stack && !call_path->optimizer;
      if (phase && !closure) {
        result.phase = phase_name(*phase);
        result.source = fmt::format("annotation '{}' was open at the OOM", shown_name(*name));
        return result;
      }
    }
  }
  if (!steps.empty() && steps.back().phase && steps.back().phase_or_default() != inputs::kDefaultPhase) {
    result.phase = *steps.back().phase;
    result.source =
        fmt::format("the last telemetry record (step {}) is in phase '{}'", steps.back().step, result.phase);
    return result;
  }
  if (call_path && call_path->has_stack) {
    const std::string_view backward =
        call_path->backward ? " (the failing malloc, in the backward pass on autograd's thread, has no Python frames)"
                            : "";
    if (call_path->repeated) {
      result.phase = phase_name(JobPhase::kTrain);
      result.repeats_step = true;
      result.source =
          call_path->episodes >= 2
              ? fmt::format("the failing statement ({}) ran {} before in the trace: the training step repeating{}",
                            call_path->statement, counted(call_path->episodes - 1, "time", "times"), backward)
              : fmt::format(
                    "the failing statement ({}) has been running for {:.0f} ms, many steps: it wraps the "
                    "training step{}",
                    call_path->statement, call_path->statement_span_ms, backward);
      return result;
    }
    if (!call_path->loop_repeats || !call_path->trained_before) {
      // A backward pass is training's, first step or not.
      result.phase = phase_name(call_path->backward ? JobPhase::kTrain : JobPhase::kUnknown);
      result.source =
          !call_path->loop_repeats
              ? fmt::format("no statement repeats in the trace before the OOM: the run failed in its first step "
                            "(at {}), so there is no earlier step to compare with{}",
                            call_path->statement, backward)
              : fmt::format("nothing before the failing statement ({}) in the trace ran a backward pass or an "
                            "optimizer step: what repeated before it was no training step, so there is no earlier "
                            "step to compare with{}",
                            call_path->statement, backward);
      return result;
    }
    const bool forward = call_path->model_forward || call_path->episode_forward;
    result.phase = phase_name(call_path->optimizer       ? JobPhase::kOptimizer
                              : call_path->serialization ? JobPhase::kCheckpoint
                              : call_path->backward      ? JobPhase::kTrain
                              : forward                  ? JobPhase::kEval
                                                         : JobPhase::kUnknown);
    result.source = fmt::format(
        "the failing statement ({}) first ran at trace event {} and never in an earlier step: a pass the "
        "recorded steps do not show{}",
        call_path->statement, call_path->statement_first_seen.value_or(0),
        call_path->backward ? backward
        : forward && !call_path->optimizer && !call_path->serialization
            ? " (a model forward outside the training step)"
            : "");
    return result;
  }
  if (!steps.empty()) {
    result.phase = phase_name(JobPhase::kTrain);
    result.repeats_step = true;
    result.source = "telemetry records only training steps and the trace has no call stacks to say otherwise";
  } else {
    result.source = "no telemetry and no call stacks";
  }
  return result;
}

}  // namespace fragscope::diagnose

#pragma once
/// @file oom_context.h
/// @brief The OOM as the doctor's inputs state it: which inputs say it happened (the OOM
/// message, num_ooms in memory_stats, memory_summary or the telemetry, a trace's `oom` entry),
/// and the moment itself in numbers: the request, what the driver had free, what PyTorch held,
/// what nvidia-smi showed (the blind spot).
///
/// A trace's exact bytes are kept over the message's figures when they print as the message
/// printed them (PyTorch's format_size: two decimals of the largest unit); otherwise the
/// message's figure is taken.
/// Thread-safety: pure functions over read-only inputs.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "diagnose/diagnosis.h"
#include "diagnose/doctor_inputs.h"
#include "diagnose/recorded_curve.h"
#include "inputs/oom_message.h"

namespace fragscope::diagnose {

/// The OOM facts gathered from every input that states one.
struct OomSignals {
  std::vector<inputs::OomMessage> messages;
  std::vector<std::string> sources;  ///< which inputs say an OOM happened
  std::optional<int> rank;
  bool any() const { return !sources.empty(); }
};

/// @brief Every input that states an OOM, and the first rank one names.
OomSignals gather_oom_signals(const DoctorInputs& inputs);

/// @brief The moment of the OOM: from `traced`'s `oom` entry at oom_index on `device` (when
/// given; `curve` is its recorded curve), the OOM message of the failing rank, the last short
/// nvidia-smi reading, and d's segment map when it is the one at the OOM.
OomContext build_oom_context(const DoctorInputs& inputs, const OomSignals& oom, const SnapshotInput* traced, int device,
                             std::optional<std::size_t> oom_index, const RecordedCurve& curve, const Diagnosis& d);

/// @brief How far a size PyTorch printed (format_size: two decimals of its largest unit) may be from the
/// exact bytes, one hundredth of that unit and a byte; `printed` is the figure as read back.
std::uint64_t pytorch_print_error(std::uint64_t printed);

/// @brief The blind spot in one line: what nvidia-smi and the driver showed against what PyTorch
/// held, the largest free block and the request; empty when nothing is known.
std::string blind_spot_line(const OomContext& context);

}  // namespace fragscope::diagnose

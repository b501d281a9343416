#pragma once
/// @file doctor_page_data.h
/// @brief What the doctor's HTML page draws, as the JSON its script reads (web/report/): the
/// segments at the OOM as a parking lot (segment_lot.h), the recorded curve with its steps and
/// the failing phase, nvidia-smi's trace, the step times, and one series per rank when several
/// were given. Everything is reduced here (each curve to its extremes per stretch, small
/// segments into groups) so that any trace makes a page of a few MB. docs/doctor.md explains
/// each panel.

#include <nlohmann/json.hpp>

#include "diagnose/diagnosis.h"

namespace fragscope::report {

/// @brief Points a series of the page keeps at most (the curve keeps what the doctor made).
inline constexpr std::size_t kPageSeriesPoints = 4096;

/// @brief Slices a segment of more runs than this is drawn in: each slice as its allocated,
/// pending and free bytes in that order (each kind's bytes stay exact, their places to a slice).
inline constexpr std::size_t kPageRunsPerSegment = 512;

/// @brief The page's data for `diagnosis`.
nlohmann::json doctor_page_data(const diagnose::Diagnosis& diagnosis);

}  // namespace fragscope::report

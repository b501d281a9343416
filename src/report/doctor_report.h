#pragma once
/// @file doctor_report.h
/// @brief `fragscope doctor` output: text for a person, one JSON object for programs, and one
/// self-contained HTML page (inline SVG and CSS, no script or font from the network).
/// docs/doctor.md explains every line and key.

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "diagnose/diagnosis.h"

namespace fragscope::report {

/// @brief A what-if line's result at the capacity in `fragscope whatif`'s words: "OOM at event
/// N", "fits (passes the OOM)", "fits"; "-" without a capacity.
std::string whatif_at_capacity(const diagnose::WhatIfLine& line);

/// @brief The report as text: verdict, evidence, context, actions, what not to do, inputs.
void write_doctor_text(std::ostream& out, const diagnose::Diagnosis& diagnosis);

/// @brief The report as JSON. Keys: verdict, headline, phase, trigger, data_wait_fraction
/// (null without telemetry), evidence [{key, text}], actions [{title, setting, evidence,
/// sufficient}], do_not, decide_with, healthy, oom, capacity_bytes, projection, whatif, ranks,
/// inputs_used, inputs_missing (docs/doctor.md).
nlohmann::json doctor_json(const diagnose::Diagnosis& diagnosis);

/// @brief The report as one HTML page: verdict and actions, the segment map at the OOM with
/// the failed request beside the largest hole, reserved and allocated over the trace with the
/// OOM marked, and the what-if table.
void write_doctor_html(std::ostream& out, const diagnose::Diagnosis& diagnosis);

}  // namespace fragscope::report

#pragma once
/// @file doctor_report.h
/// @brief `fragscope doctor` output: text for a person, one JSON object for programs, and one
/// self-contained HTML page (its data and the bundled script inline, nothing from the network).
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
/// segment_map, inputs_used, inputs_missing (docs/doctor.md).
nlohmann::json doctor_json(const diagnose::Diagnosis& diagnosis);

/// @brief The report as one HTML page: the verdict, the key figures (each with its exact value in
/// `data-value`), the text's sections, and panels the bundled script (web/report/) draws from
/// doctor_page_data(): the segments at the OOM as a parking lot with the failed request, the
/// curve with steps and the failing phase, nvidia-smi's trace, step times, one chart per rank.
void write_doctor_html(std::ostream& out, const diagnose::Diagnosis& diagnosis);

}  // namespace fragscope::report

#pragma once
/// @file doctor_actions.h
/// @brief The ranked actions and the "do not" list for a diagnosis, each with its exact
/// setting and the measurement it follows from. docs/doctor.md lists them per verdict.

#include "diagnose/diagnosis.h"

namespace fragscope::diagnose {

/// @brief Fills `diagnosis.actions` (first = try first) and `diagnosis.do_not` from its
/// verdict, phase, projection, what-if table and input-pipeline figures.
void rank_actions(Diagnosis& diagnosis);

}  // namespace fragscope::diagnose

#pragma once
/// @file whatif_lines.h
/// @brief The doctor's table of allocator settings, from a what-if sweep (replay/whatif.h).

#include "diagnose/diagnosis.h"
#include "replay/whatif.h"

namespace fragscope::diagnose {

/// @brief Appends one WhatIfLine per config of `report` to d.whatif, and sets d.ideal_peak_bytes
/// and, when the sweep recommends one, d.recommended_conf.
void fill_whatif(const replay::WhatIfReport& report, Diagnosis& d);

}  // namespace fragscope::diagnose

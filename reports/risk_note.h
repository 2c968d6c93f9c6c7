// The convergence-risk note (core/convergence_risk) in the terminal tables that
// recommend configurations: a "note" column when any row has one, and one
// footnote that explains it.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/config.h"

namespace tune {

// Whether any of the configurations carries a note, so a table adds the column.
bool any_risk(std::span<const TrialConfig* const> configs);

// "convergence risk" or "".
std::string risk_cell_text(const TrialConfig& c);

// "<indent>convergence risk: pure bf16 keeps ...\n" once for each distinct note
// among `configs`; "" when none has one.
std::string risk_footnotes(std::span<const TrialConfig* const> configs, const std::string& indent = "  ");

}  // namespace tune

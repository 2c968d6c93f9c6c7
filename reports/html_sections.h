// The sections of the HTML report, each in its own html_<section>.cpp. A
// section writes its markup (tables readable without JavaScript) and appends
// the specs of its charts to `charts`. `prefix` keeps element ids unique when
// a report holds several sweeps ("s0-", "s1-", "cmp1-").
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/html_table.h"
#include "reports/html_writer.h"
#include "reports/page_data.h"
#include "reports/sweep_data.h"

namespace tune {

// Per memory budget and context length, the fastest configuration that fits; first on the page.
void write_what_to_run_section(HtmlWriter& html, std::span<const SweepData> sweeps);
// Sweep, host, devices, software versions, when; one column per sweep.
void write_overview_section(HtmlWriter& html, std::span<const SweepData> sweeps);
// enumerated -> invalid / pruned / run -> ok / oom / failed / timeout; one column per sweep.
void write_funnel_section(HtmlWriter& html, std::span<const SweepData> sweeps);

void write_pareto_section(HtmlWriter& html, PageData& page, const SweepData& sweep, const std::string& prefix);
// The predicted front of the configurations not measured, labelled "predicted".
void write_predicted_section(HtmlWriter& html, PageData& page, const SweepData& sweep, const std::string& prefix);
void write_breakdown_section(HtmlWriter& html, PageData& page, const SweepData& sweep, const std::string& prefix);
void write_accuracy_section(HtmlWriter& html, PageData& page, const SweepData& sweep, const std::string& prefix);
void write_effects_section(HtmlWriter& html, PageData& page, const SweepData& sweep, const std::string& prefix);
void write_trials_section(HtmlWriter& html, PageData& page, const SweepData& sweep, const std::string& prefix);

// Both fronts on one chart and the deltas of the configurations in both.
void write_comparison_section(HtmlWriter& html, PageData& page, const SweepData& baseline, const SweepData& other,
                              const std::string& prefix);

// <h2 id=...>title</h2> opening a <section>; the caller closes the section.
void open_section(HtmlWriter& html, const std::string& id, std::string_view title);

// The optimizer/precision/... cells shared by the trial, front and delta tables.
std::vector<std::string> config_cells(const TrialConfig& c);
std::vector<HtmlColumn> config_columns();

// The "note" column of every table that recommends configurations: "convergence
// risk" (core/convergence_risk) with the reason on hover, else empty.
HtmlColumn risk_column();
HtmlCell risk_cell(const TrialConfig& c);

}  // namespace tune

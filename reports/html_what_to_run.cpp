// The "what to run" panel at the top of the report: per memory budget and
// context length, the fastest configuration that fits (reports/what_to_run),
// measured where a trial finished, else predicted and labelled so.
#include <algorithm>

#include <fmt/format.h>

#include "reports/html_sections.h"
#include "reports/html_table.h"
#include "reports/report_format.h"
#include "reports/what_to_run.h"

namespace tune {
namespace {

HtmlTable what_to_run_table(const SweepData& sweep) {
    HtmlTable table({{"memory per GPU", false, "the budget: the sweep's memory limit and common device sizes below it"},
                     {"context", true, "tokens per sequence"},
                     {"basis", false, "measured by a trial, or predicted by the estimator (not measured)"},
                     {"trial", true, ""},
                     {"configuration", false, "optimizer, precision, ZeRO stage, accumulation, checkpointing, ..."},
                     {"tokens/s", true, "all ranks"},
                     {"peak", true, "per GPU"},
                     risk_column()});
    for (const WhatToRunRow& row : what_to_run(sweep)) {
        std::vector<HtmlCell> cells{{budget_text(row), ""}, {std::to_string(row.context), ""}};
        if (!row.trial) {
            cells.push_back({"nothing fits", "basis none"});
            table.add_row(std::move(cells));
            continue;
        }
        const TrialRecord& t = sweep.trials[*row.trial];
        const bool measured = row.basis == Basis::measured;
        cells.push_back({measured ? "measured" : "predicted (not measured)", measured ? "basis st-ok" : "basis predicted"});
        cells.push_back({std::to_string(t.id), ""});
        cells.push_back({summary(t.result.config), "config"});
        cells.push_back(throughput_cell(answer_tokens_per_s(sweep, row)));
        cells.push_back(bytes_cell(answer_peak(sweep, row)));
        cells.push_back(risk_cell(t.result.config));
        table.add_row(std::move(cells));
    }
    return table;
}

}  // namespace

void write_what_to_run_section(HtmlWriter& html, std::span<const SweepData> sweeps) {
    open_section(html, "what-to-run", "What to run");
    html.element("p",
                 "The fastest configuration that fits each memory budget at each context length: measured when a "
                 "trial that fits finished, otherwise the estimator's prediction for one not measured yet (labelled "
                 "predicted; run it to measure it). A configuration marked convergence risk trains in pure bf16.",
                 {{"class", "note"}});
    const bool cpu = std::any_of(sweeps.begin(), sweeps.end(), [](const SweepData& s) { return s.summary.record.backend == "cpu"; });
    if (cpu)
        html.element("p",
                     "On the CPU backend the memory limit bounds what the trainer allocates; the peak shown also holds "
                     "the process's own baseline, so it can exceed the limit.",
                     {{"class", "note"}});
    for (std::size_t i = 0; i < sweeps.size(); ++i) {
        if (sweeps.size() > 1) html.element("h3", "Sweep " + sweeps[i].name());
        what_to_run_table(sweeps[i]).write(html, fmt::format("s{}-what-to-run-table", i), false,
                                           "Nothing was measured ok or is predicted to fit, so there is nothing to recommend.");
    }
    html.close("section");
}

}  // namespace tune

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

HtmlTable what_to_run_table(const SweepData& sweep, const WhatToRunChoice& choice) {
    HtmlTable table(
        {{"memory per GPU", false, "the budget: the sweep's memory limit and common device sizes below it"},
         {"context", true, "tokens per sequence"},
         {"basis", false, "measured by a trial, or predicted by the estimator (not measured)"},
         {"trial", true, ""},
         {"configuration", false, "optimizer, precision, ZeRO stage, accumulation, checkpointing, ..."},
         {"tokens/s", true, "all ranks"},
         {"peak", true,
          sweep.summary.record.framework == "tune" ? std::string("per GPU")
                                                   : "per GPU: the device memory " + sweep.summary.record.framework +
                                                         " is predicted to use (the sweep's [framework])"},
         risk_column(),
         {"alternative with convergence risk", false,
          "the faster configuration in pure bf16 passed over for this one, and what it gains"}});
    for (const WhatToRunRow& row : what_to_run(sweep, choice)) {
        std::vector<HtmlCell> cells{{budget_text(row), ""}, {std::to_string(row.context), ""}};
        if (!row.trial) {
            cells.push_back({"nothing fits", "basis none"});
            table.add_row(std::move(cells));
            continue;
        }
        const TrialRecord& t = sweep.trials[*row.trial];
        const bool measured = row.basis == Basis::measured;
        cells.push_back(
            {measured ? "measured" : "predicted (not measured)", measured ? "basis st-ok" : "basis predicted"});
        cells.push_back({std::to_string(t.id), ""});
        cells.push_back({summary(t.result.config), "config"});
        cells.push_back(throughput_cell(answer_tokens_per_s(sweep, row)));
        cells.push_back(bytes_cell(answer_peak(sweep, row)));
        cells.push_back(risk_cell(t.result.config));
        cells.push_back({alternative_text(sweep, row), row.alternative ? "alternative" : ""});
        table.add_row(std::move(cells));
    }
    return table;
}

std::string optimizer_key(const std::optional<Optimizer>& o) { return o ? std::string(to_string(*o)) : "any"; }

// The reader's choices (the report's script shows their controls): the optimizer, and whether
// configurations with a convergence risk rank with the rest. One table per choice; the default
// one (any optimizer, risk-free first) is visible, and the only one without JavaScript.
void write_choices(HtmlWriter& html, const SweepData& sweep, std::size_t index) {
    const std::vector<Optimizer> optimizers = sweep_optimizers(sweep);
    html.open("div", {{"class", "wtr-controls"}, {"hidden", "hidden"}});
    html.open("label").text("optimizer ");
    html.open("select", {{"class", "wtr-optimizer"}});
    html.element("option", "any", {{"value", "any"}});
    for (Optimizer o : optimizers) html.element("option", to_string(o), {{"value", std::string(to_string(o))}});
    html.close("select").close("label");
    html.open("label");
    html.empty("input", {{"type", "checkbox"}, {"class", "wtr-risk"}});
    html.text(" rank configurations with a convergence risk with the rest (tune best --allow-risk)");
    html.close("label").close("div");
    std::vector<std::optional<Optimizer>> filters{std::nullopt};
    if (optimizers.size() > 1) filters.insert(filters.end(), optimizers.begin(), optimizers.end());
    for (bool allow_risk : {false, true})
        for (const auto& optimizer : filters) {
            const bool shown = !allow_risk && !optimizer;
            const std::string key = optimizer_key(optimizer);
            const std::string_view risk = allow_risk ? "1" : "0";
            if (shown)
                html.open("div", {{"class", "wtr-choice"}, {"data-risk", risk}, {"data-optimizer", key}});
            else
                html.open(
                    "div",
                    {{"class", "wtr-choice"}, {"data-risk", risk}, {"data-optimizer", key}, {"hidden", "hidden"}});
            const std::string id = shown ? fmt::format("s{}-what-to-run-table", index)
                                         : fmt::format("s{}-what-to-run-{}-{}", index, allow_risk ? "risk" : "safe",
                                                       optimizer_key(optimizer));
            what_to_run_table(sweep, {allow_risk, optimizer})
                .write(html, id, false,
                       "Nothing was measured ok or is predicted to fit, so there is nothing to recommend.");
            html.close("div");
        }
}

}  // namespace

void write_what_to_run_section(HtmlWriter& html, std::span<const SweepData> sweeps) {
    open_section(html, "what-to-run", "What to run");
    html.element("p",
                 "The fastest configuration that fits each memory budget at each context length: measured when a "
                 "trial that fits finished, otherwise the estimator's prediction for one not measured yet (labelled "
                 "predicted; run it to measure it). Configurations with a convergence risk (pure bf16) answer only "
                 "where nothing else fits; a faster one is shown beside the answer as the alternative, with what it "
                 "gains.",
                 {{"class", "note"}});
    const bool cpu =
        std::any_of(sweeps.begin(), sweeps.end(), [](const SweepData& s) { return s.summary.record.backend == "cpu"; });
    if (cpu)
        html.element("p",
                     "On the CPU backend the memory limit bounds what the trainer allocates; the peak shown also holds "
                     "the process's own baseline, so it can exceed the limit.",
                     {{"class", "note"}});
    for (std::size_t i = 0; i < sweeps.size(); ++i) {
        if (sweeps.size() > 1) html.element("h3", "Sweep " + sweeps[i].name());
        write_choices(html, sweeps[i], i);
    }
    html.close("section");
}

}  // namespace tune

#include "reports/text_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "reports/accuracy.h"
#include "reports/comparison.h"
#include "reports/front_ties.h"
#include "reports/funnel.h"
#include "reports/makespan_text.h"
#include "reports/predicted_front.h"
#include "reports/report_format.h"
#include "reports/risk_note.h"
#include "reports/text_table.h"
#include "reports/what_to_run.h"
#include "store/store.h"

namespace tune {
namespace {

std::string funnel_text(const SweepData& sweep) {
    TextTable t({"stage", "trials", "share"});
    const double total = static_cast<double>(sweep.summary.total());
    for (const auto& stage : funnel(sweep.summary)) {
        const std::string share =
            total > 0 ? fmt::format("{:.1f}%", static_cast<double>(stage.count) / total * 100) : "";
        t.add_row({std::string(static_cast<std::size_t>(stage.depth) * 2, ' ') + stage.name,
                   std::to_string(stage.count), share});
    }
    return t.render("  ");
}

std::vector<const TrialConfig*> configs_of(const SweepData& sweep, std::span<const std::size_t> trials) {
    std::vector<const TrialConfig*> out;
    for (std::size_t i : trials) out.push_back(&sweep.trials[i].result.config);
    return out;
}

std::string front_text(const SweepData& sweep) {
    if (sweep.front.empty()) return "  no trial was measured ok, so there is no measured front\n";
    const auto configs = configs_of(sweep, sweep.front);
    const bool notes = any_risk(configs);
    std::vector<std::string> header{"trial",     "configuration", "peak",  "tokens/s", "MFU",
                                    "est. peak", "est. tokens/s", "noise", "tie"};
    if (notes) header.emplace_back("note");
    TextTable t(header);
    const std::vector<std::string> ties = front_tie_marks(sweep), noise = front_noise_texts(sweep);
    for (std::size_t k = 0; k < sweep.front.size(); ++k) {
        const TrialRecord& r = sweep.trials[sweep.front[k]];
        const auto& e = r.result.estimate;
        std::vector<std::string> row{std::to_string(r.id),
                                     summary(r.result.config),
                                     bytes_text(r.result.memory.peak),
                                     throughput_text(r.result.tokens_per_s),
                                     fmt::format("{:.1f}%", r.result.mfu * 100),
                                     e ? bytes_text(e->memory.peak) : "-",
                                     e ? throughput_text(e->tokens_per_s) : "-",
                                     noise[k],
                                     ties[k]};
        if (notes) row.push_back(risk_cell_text(r.result.config));
        t.add_row(std::move(row));
    }
    std::string out = t.render("  ") + risk_footnotes(configs);
    for (const auto& mark : ties)
        if (!mark.empty()) return out + "  " + front_tie_legend() + "\n";
    return out;
}

// The report's first answer: per budget and context, the fastest that fits (reports/what_to_run).
std::string what_to_run_text(const SweepData& sweep) {
    const std::vector<WhatToRunRow> rows = what_to_run(sweep);
    if (rows.empty()) return "  nothing was measured ok or is predicted to fit\n";
    std::vector<const TrialConfig*> configs;
    for (const WhatToRunRow& row : rows)
        if (row.trial) configs.push_back(&sweep.trials[*row.trial].result.config);
    const bool notes = any_risk(configs);
    const bool alternatives =
        std::any_of(rows.begin(), rows.end(), [](const WhatToRunRow& r) { return r.alternative; });
    // Under the sweep's [framework] the peak is that stack's predicted device memory.
    const std::string& framework = sweep.summary.record.framework;
    std::vector<std::string> header{"memory per GPU",
                                    "context",
                                    "basis",
                                    "trial",
                                    "configuration",
                                    "tokens/s",
                                    framework == "tune" ? std::string("peak") : framework + " peak (pred.)"};
    if (notes) header.emplace_back("note");
    if (alternatives) header.emplace_back("alternative with convergence risk");
    TextTable t(header);
    for (const WhatToRunRow& row : rows) {
        if (!row.trial) {
            t.add_row({budget_text(row), std::to_string(row.context), "nothing fits"});
            continue;
        }
        const TrialRecord& r = sweep.trials[*row.trial];
        std::vector<std::string> cells{budget_text(row),
                                       std::to_string(row.context),
                                       row.basis == Basis::measured ? "measured" : "predicted",
                                       std::to_string(r.id),
                                       summary(r.result.config),
                                       throughput_text(answer_tokens_per_s(sweep, row)),
                                       bytes_text(answer_peak(sweep, row))};
        if (notes) cells.push_back(risk_cell_text(r.result.config));
        if (alternatives) cells.push_back(alternative_text(sweep, row));
        t.add_row(std::move(cells));
    }
    std::string out = t.render("  ") + risk_footnotes(configs);
    if (sweep.summary.record.backend == "cpu")
        out +=
            "  (CPU backend: the limit bounds what the trainer allocates; the peak also holds the process's "
            "baseline)\n";
    return out;
}

std::string model_line(const SweepData& sweep) {
    if (sweep.trials.empty()) return "model unknown (no trials)\n";
    const ModelSpec& m = sweep.trials.front().result.config.model;
    return fmt::format("model {} ({} parameters, {} layers, hidden {})\n", m.name,
                       count_text(static_cast<double>(m.param_count())), m.layers, m.hidden);
}

// The estimator's front of what was not measured, after the measured one.
std::string predicted_text(const SweepData& sweep) {
    std::vector<PredictedRow> rows;
    std::vector<std::size_t> front;
    for (std::size_t i : sweep.predicted_front) {
        const TrialRecord& t = sweep.trials[i];
        front.push_back(rows.size());
        rows.push_back(predicted_row(t));
    }
    if (rows.empty()) return "Predicted Pareto front: no configuration left unmeasured is predicted to fit\n";
    return predicted_front_text(rows, front);
}

void add_error_row(TextTable& t, const std::string& quantity, const ErrorSummary& s) {
    if (s.count == 0) {
        t.add_row({quantity, "0", "-", "-", "-", "-", "-", "-"});
        return;
    }
    t.add_row({quantity, std::to_string(s.count), percent_text(s.bias_pct), fmt::format("{:.1f}%", s.mean_abs_pct),
               fmt::format("{:.1f}%", s.median_abs_pct), fmt::format("{:.1f}%", s.p90_abs_pct),
               fmt::format("{:.1f}%", s.max_abs_pct), fmt::format("{}/{}", s.within_10pct, s.count)});
}

std::string accuracy_text(const SweepData& sweep) {
    const Accuracy a = estimator_accuracy(sweep);
    TextTable t({"quantity", "trials", "bias", "mean |err|", "median |err|", "p90 |err|", "max |err|", "within 10%"});
    add_error_row(t, "peak memory", a.memory_summary);
    const bool before = a.step_before_calibration_summary.count > 0;
    if (before) add_error_row(t, "step time, before calibration", a.step_before_calibration_summary);
    add_error_row(t, before ? "step time, after calibration" : "step time", a.step_summary);
    // The same at each trial's machine speed: the host's pace taken out (core/machine_speed.h).
    if (a.step_before_calibration_at_trial_speed_summary.count > 0)
        add_error_row(t, "step time, before calibration, at trial speed",
                      a.step_before_calibration_at_trial_speed_summary);
    if (a.step_at_trial_speed_summary.count > 0)
        add_error_row(t, "step time, after calibration, at trial speed", a.step_at_trial_speed_summary);
    std::string out = t.render("  ");
    if (const std::string medians = step_error_medians_text(a); !medians.empty()) out += "  " + medians + "\n";
    if (a.fit_but_oom) out += fmt::format("  {} trial(s) estimated to fit ran out of memory\n", a.fit_but_oom);
    return out;
}

std::string sweep_text(const SweepData& sweep) {
    const SweepRecord& r = sweep.summary.record;
    std::string out = fmt::format("sweep {}: {} x {} on {}, memory limit {}\n", sweep.name(), r.device.count,
                                  r.device.name.empty() ? "unknown device" : r.device.name,
                                  r.host.empty() ? "unknown host" : r.host, bytes_text(sweep.memory_limit));
    out += model_line(sweep);
    out += fmt::format("makespan {}\n", makespan_text(sweep));
    out += "\nwhat to run (the fastest that fits each memory budget and context; measured, else predicted)\n" +
           what_to_run_text(sweep);
    out += "\nfunnel\n" + funnel_text(sweep);
    out += fmt::format("\nPareto front (measured: {} configurations, peak memory vs tokens/s)\n", sweep.front.size()) +
           front_text(sweep);
    out += "\n" + predicted_text(sweep);
    out += "\nestimator error ((estimated - measured) / measured)\n" + accuracy_text(sweep);
    return out;
}

std::string comparison_text(const SweepData& a, const SweepData& b) {
    const Comparison c = compare_sweeps(a, b);
    std::string out =
        fmt::format("{} against {}: {} configurations in both ({} by hash, {} by dimensions), {} finished in both",
                    b.name(), a.name(), c.matched.size(), c.by_hash, c.by_dimensions, c.both_ok);
    if (c.tokens_delta_median_pct && c.peak_delta_median_pct)
        out += fmt::format("; median change tokens/s {}, peak memory {}", percent_text(*c.tokens_delta_median_pct),
                           percent_text(*c.peak_delta_median_pct));
    return out + "\n";
}

}  // namespace

std::string render_text_report(std::span<const SweepData> sweeps) {
    std::string out;
    for (std::size_t i = 0; i < sweeps.size(); ++i) out += (i ? "\n" : "") + sweep_text(sweeps[i]);
    if (sweeps.size() > 1) {
        out += "\ncomparison\n";
        for (std::size_t i = 1; i < sweeps.size(); ++i) out += "  " + comparison_text(sweeps[0], sweeps[i]);
    }
    return out;
}

std::string text_report(const Store& store, std::span<const std::string> sweeps) {
    const auto names = resolve_sweep_names(store, sweeps);
    // Sweep names, hosts and devices come from the database: nothing in it reaches the terminal raw.
    return printable(render_text_report(load_sweeps(store, names)), "\n");
}

}  // namespace tune

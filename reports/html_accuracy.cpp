// Whether the estimator can be trusted: predicted against measured peak
// memory and step time, the distribution of its errors, and its worst misses.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "reports/accuracy.h"
#include "reports/html_chart.h"
#include "reports/html_sections.h"
#include "reports/html_table.h"
#include "reports/report_format.h"

namespace tune {
namespace {

constexpr std::size_t kWorstCases = 10;

// Every sample up to the cap, else an even stride through them plus the worst ones.
std::vector<ErrorSample> plotted_samples(const std::vector<ErrorSample>& samples) {
    if (samples.size() <= kMaxScatterPoints) return samples;
    std::vector<ErrorSample> out = worst(samples, kWorstCases);
    const double stride = static_cast<double>(samples.size()) / static_cast<double>(kMaxScatterPoints - kWorstCases);
    for (double at = 0; at < static_cast<double>(samples.size()); at += stride)
        out.push_back(samples[static_cast<std::size_t>(at)]);
    return out;
}

nlohmann::json versus_spec(const SweepData& sweep, const std::vector<ErrorSample>& samples, double scale,
                           const std::string& unit) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& e : plotted_samples(samples)) {
        nlohmann::json lines = tooltip_lines(sweep.trials[e.trial]);
        lines.push_back(fmt::format("error {}", percent_text(e.error_pct)));
        points.push_back({{"x", e.estimated * scale}, {"y", e.measured * scale}, {"t", std::move(lines)}});
    }
    return {{"kind", "versus"},
            {"x_label", "estimated " + unit},
            {"y_label", "measured " + unit},
            {"points", std::move(points)}};
}

// Peak memory against peak memory, in the unit the largest value reaches.
nlohmann::json memory_versus_spec(const SweepData& sweep, const std::vector<ErrorSample>& samples) {
    double largest = 0;
    for (const auto& e : samples) largest = std::max({largest, e.estimated, e.measured});
    const ByteUnit unit = byte_unit_for(static_cast<std::uint64_t>(largest));
    return versus_spec(sweep, samples, 1.0 / unit.bytes, fmt::format("peak ({})", unit.name));
}

// The samples whose error shows as more than 0.0%: an exact estimate is no miss to list.
std::vector<ErrorSample> inexact(const std::vector<ErrorSample>& samples) {
    std::vector<ErrorSample> out;
    for (const auto& e : samples)
        if (!shown_as_zero(e.error_pct)) out.push_back(e);
    return out;
}

std::string bin_label(const HistogramBin& b) {
    if (std::isinf(b.from_pct)) return fmt::format("< {:.0f}%", b.to_pct);
    if (std::isinf(b.to_pct)) return fmt::format(">= {:+.0f}%", b.from_pct);
    return fmt::format("{:+.0f}..{:+.0f}%", b.from_pct, b.to_pct);
}

nlohmann::json histogram_spec(const Accuracy& a) {
    nlohmann::json labels = nlohmann::json::array(), memory = nlohmann::json::array(), step = nlohmann::json::array();
    for (const auto& b : error_histogram(a)) {
        labels.push_back(bin_label(b));
        memory.push_back(b.memory);
        step.push_back(b.step);
    }
    return {{"kind", "histogram"},
            {"labels", std::move(labels)},
            {"x_label", "error of the estimate (estimated - measured) / measured"},
            {"series", nlohmann::json::array({{{"label", "peak memory"}, {"values", std::move(memory)}},
                                              {{"label", "step time"}, {"values", std::move(step)}}})}};
}

void add_summary_row(HtmlTable& table, const std::string& quantity, const ErrorSummary& s) {
    const auto pct = [&](double v) { return s.count ? fmt::format("{:.1f}", v) : std::string(); };
    table.add_row({{quantity, ""},
                   {std::to_string(s.count), ""},
                   {s.count ? percent_text(s.bias_pct) : "", ""},
                   {pct(s.mean_abs_pct), ""},
                   {pct(s.median_abs_pct), ""},
                   {pct(s.p90_abs_pct), ""},
                   {pct(s.max_abs_pct), ""},
                   {std::to_string(s.within_10pct), ""}});
}

HtmlTable summary_table(const Accuracy& a) {
    HtmlTable t({{"quantity", false, ""},
                 {"trials", true, "ok trials with an estimate"},
                 {"bias", true, "mean signed error; positive means the estimator overestimates"},
                 {"mean |err| %", true, ""},
                 {"median |err| %", true, ""},
                 {"p90 |err| %", true, ""},
                 {"max |err| %", true, ""},
                 {"within 10%", true, "trials whose error is at most 10%"}});
    add_summary_row(t, "peak memory", a.memory_summary);
    // Step time twice: the estimate before any trial fed calibration (the model and its
    // probes alone), then the calibrated one each trial was planned with.
    if (a.step_before_calibration_summary.count > 0)
        add_summary_row(t, "step time, before calibration", a.step_before_calibration_summary);
    add_summary_row(t, a.step_before_calibration_summary.count > 0 ? "step time, after calibration" : "step time",
                    a.step_summary);
    // The same at each trial's machine speed: the host's pace taken out (core/machine_speed.h).
    if (a.step_before_calibration_at_trial_speed_summary.count > 0)
        add_summary_row(t, "step time, before calibration, at the trial's machine speed",
                        a.step_before_calibration_at_trial_speed_summary);
    if (a.step_at_trial_speed_summary.count > 0)
        add_summary_row(t, "step time, after calibration, at the trial's machine speed", a.step_at_trial_speed_summary);
    // Beside the tagged peak: what the process (CPU) or device (GPU) really held.
    if (a.real_memory_summary.count > 0) add_summary_row(t, "real peak memory", a.real_memory_summary);
    return t;
}

HtmlTable worst_table(const SweepData& sweep, const Accuracy& a) {
    std::vector<HtmlColumn> columns{{"trial", true, ""}, {"quantity", false, ""}};
    for (auto& c : config_columns()) columns.push_back(std::move(c));
    columns.insert(columns.end(), {{"estimated", true, "bytes or seconds"},
                                   {"measured", true, "bytes or seconds"},
                                   {"error", true, "(estimated - measured) / measured"}});
    HtmlTable table(std::move(columns));
    const auto add = [&](const std::vector<ErrorSample>& samples, const std::string& quantity, bool memory) {
        for (const auto& e : worst(inexact(samples), kWorstCases)) {
            const TrialRecord& t = sweep.trials[e.trial];
            std::vector<HtmlCell> row{{std::to_string(t.id), ""}, {quantity, ""}};
            for (auto& c : config_cells(t.result.config)) row.push_back({std::move(c), ""});
            const auto value = [&](double v) {
                return memory ? bytes_cell(static_cast<std::uint64_t>(v)) : HtmlCell{seconds_text(v), ""};
            };
            row.push_back(value(e.estimated));
            row.push_back(value(e.measured));
            row.push_back({percent_text(e.error_pct), ""});
            table.add_row(std::move(row));
        }
    };
    add(a.memory, "peak memory", true);
    add(a.step, "step time", false);
    add(a.real_memory, "real peak memory", true);
    return table;
}

}  // namespace

void write_accuracy_section(HtmlWriter& html, PageData& page, const SweepData& sweep, const std::string& prefix) {
    open_section(html, prefix + "accuracy", "Estimator accuracy");
    const Accuracy a = estimator_accuracy(sweep);
    summary_table(a).write(html, prefix + "accuracy-table", false, "");
    if (const std::string medians = step_error_medians_text(a); !medians.empty())
        html.element("p", medians, {{"class", "step-error-medians"}});
    if (a.fit_but_oom != 0)
        html.element("p", fmt::format("{} trial(s) the estimator said would fit ran out of memory.", a.fit_but_oom),
                     {{"class", "warning"}});
    if (a.memory.empty() && a.step.empty()) {
        html.element("p", "No trial finished with an estimate beside it, so there is nothing to compare yet.",
                     {{"class", "empty"}});
        html.close("section");
        return;
    }
    html.open("div", {{"class", "chart-grid"}});
    write_chart(html, page, prefix + "accuracy-memory", memory_versus_spec(sweep, a.memory),
                "Peak memory per GPU: estimated against measured. Points on the diagonal are exact.");
    write_chart(html, page, prefix + "accuracy-step", versus_spec(sweep, a.step, 1.0, "seconds per step"),
                "Seconds per optimizer step: estimated against measured.");
    write_chart(html, page, prefix + "accuracy-histogram", histogram_spec(a),
                "How many trials fall in each band of estimation error.");
    html.close("div");
    html.element("h3", "Worst estimates");
    worst_table(sweep, a).write(html, prefix + "worst-table", false,
                                "Every estimate was exact to the precision shown (0.0%), so none is listed.");
    html.close("section");
}

}  // namespace tune

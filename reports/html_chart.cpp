#include "reports/html_chart.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <utility>

#include <fmt/format.h>

#include "core/convergence_risk.h"
#include "core/dimensions.h"
#include "core/parallel_plan.h"

#include "reports/report_format.h"

namespace tune {
namespace {

bool plottable(const TrialRecord& t) { return t.result.status == TrialStatus::ok && t.measured; }

}  // namespace

void write_chart(HtmlWriter& html, PageData& page, const std::string& id, nlohmann::json spec,
                 std::string_view caption) {
    spec["id"] = id;
    page.charts.push_back(std::move(spec));
    html.open("figure", {{"class", "chart"}});
    html.open("div", {{"class", "canvas-box"}});
    html.open("canvas", {{"id", id}, {"role", "img"}, {"aria-label", caption}}).close("canvas");
    html.close("div");
    html.element("figcaption", caption);
    html.close("figure");
}

std::vector<std::size_t> plotted_trials(const SweepData& sweep, std::size_t max_points) {
    std::vector<std::size_t> ok;
    for (std::size_t i = 0; i < sweep.trials.size(); ++i)
        if (plottable(sweep.trials[i])) ok.push_back(i);
    if (ok.size() <= max_points) return ok;

    double max_x = 0, max_y = 0;
    for (auto i : ok) {
        max_x = std::max(max_x, static_cast<double>(sweep.trials[i].result.memory.peak));
        max_y = std::max(max_y, sweep.trials[i].result.tokens_per_s);
    }
    // A square grid with at most max_points cells; the front is always kept.
    const auto side = static_cast<std::size_t>(std::sqrt(static_cast<double>(max_points)));
    const auto cell = [&](double v, double max) {
        return std::min(side - 1, static_cast<std::size_t>(v / (max > 0 ? max : 1) * static_cast<double>(side)));
    };
    std::set<std::size_t> kept(sweep.front.begin(), sweep.front.end());
    std::set<std::size_t> used;
    for (auto i : ok) {
        const auto& r = sweep.trials[i].result;
        const std::size_t c = cell(static_cast<double>(r.memory.peak), max_x) * side + cell(r.tokens_per_s, max_y);
        if (used.insert(c).second) kept.insert(i);
    }
    return {kept.begin(), kept.end()};
}

nlohmann::json tooltip_lines(const TrialRecord& t) {
    const TrialConfig& c = t.result.config;
    nlohmann::json lines = nlohmann::json::array();
    lines.push_back(fmt::format("trial {}: {} ({} GPU{})", t.id, c.model.name, parallel_plan(c).world(),
                                parallel_plan(c).world() == 1 ? "" : "s"));
    // The dimensions, three to a line.
    std::string line;
    for (std::size_t i = 0; i < kDimensionCount; ++i) {
        const Dimension& d = dimensions()[i];
        line += fmt::format("{}{} {}", line.empty() ? "" : ", ", d.name, d.text(c));
        if (i % 3 == 2 || i + 1 == kDimensionCount) lines.push_back(std::exchange(line, {}));
    }
    lines.push_back(fmt::format("peak {} ({}), {} tokens/s, MFU {:.1f}%", bytes_text(t.result.memory.peak),
                                t.result.memory.peak_phase.empty() ? "phase unknown" : t.result.memory.peak_phase,
                                throughput_text(t.result.tokens_per_s), t.result.mfu * 100));
    if (const auto& e = t.result.estimate)
        lines.push_back(
            fmt::format("estimated {}, {} tokens/s", bytes_text(e->memory.peak), throughput_text(e->tokens_per_s)));
    if (const auto risk = convergence_risk(c)) lines.push_back(fmt::format("{}: {}", kConvergenceRiskLabel, *risk));
    return lines;
}

ByteUnit memory_axis_unit(std::span<const SweepData* const> sweeps) {
    std::uint64_t largest = 0;
    for (const SweepData* s : sweeps) {
        largest = std::max(largest, s->memory_limit);
        for (const TrialRecord& t : s->trials) {
            if (plottable(t)) largest = std::max(largest, t.result.memory.peak);
            if (t.result.estimate && t.result.estimate->fits)
                largest = std::max(largest, t.result.estimate->memory.peak);
        }
    }
    return byte_unit_for(largest);
}

nlohmann::json pareto_point(const TrialRecord& t, ByteUnit unit) {
    return {{"x", in_unit(t.result.memory.peak, unit)},
            {"y", t.result.tokens_per_s},
            {"z", t.result.config.zero_stage},
            {"t", tooltip_lines(t)}};
}

nlohmann::json front_line(const SweepData& sweep, ByteUnit unit) {
    nlohmann::json points = nlohmann::json::array();
    for (auto i : sweep.front) points.push_back(pareto_point(sweep.trials[i], unit));
    return points;
}

namespace {

// The process's baseline a CPU sweep's peaks hold beside what the limit bounds: the median of the
// trials' overhead component, measured where they ran, else estimated; 0 when none says.
std::uint64_t cpu_baseline(const SweepData& sweep) {
    std::vector<std::uint64_t> seen;
    for (const TrialRecord& t : sweep.trials) {
        if (plottable(t))
            seen.push_back(t.result.memory[Component::overhead]);
        else if (t.result.estimate)
            seen.push_back(t.result.estimate->memory[Component::overhead]);
    }
    if (seen.empty()) return 0;
    std::nth_element(seen.begin(), seen.begin() + static_cast<std::ptrdiff_t>(seen.size() / 2), seen.end());
    return seen[seen.size() / 2];
}

}  // namespace

nlohmann::json memory_limit_line(const SweepData& sweep, ByteUnit unit) {
    std::string label = "memory limit " + bytes_text(sweep.memory_limit) + " (" + sweep.name() + ")";
    // On the CPU the limit bounds what the trainer allocates, and a peak also holds the process's
    // baseline: the line stands where a peak reaches the limit.
    const std::uint64_t baseline = sweep.summary.record.backend == "cpu" ? cpu_baseline(sweep) : 0;
    if (baseline > 0) label += ", drawn above the process's baseline of " + bytes_text(baseline);
    return {{"x", in_unit(sweep.memory_limit + baseline, unit)}, {"label", std::move(label)}};
}

}  // namespace tune

// Charts in the HTML report. C++ decides what is plotted (points, curves,
// limits) and writes it as a JSON spec; assets/report.js turns each spec into
// a Chart.js chart on the <canvas> this writes. The tables next to each chart
// carry the same numbers for readers without JavaScript.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/html_writer.h"
#include "reports/page_data.h"
#include "reports/report_format.h"
#include "reports/sweep_data.h"

namespace tune {

// Writes a <figure> with the canvas and its caption; appends `spec` (given an
// "id") to the page's charts.
void write_chart(HtmlWriter& html, PageData& page, const std::string& id, nlohmann::json spec,
                 std::string_view caption);

// The trials of a sweep a scatter plot shows: every ok trial up to
// `max_points`; beyond that the front plus one trial per cell of a grid over
// the plot, so a 10,000-trial sweep keeps its shape and the page stays quick.
std::vector<std::size_t> plotted_trials(const SweepData& sweep, std::size_t max_points);

// The whole configuration and its results, one line each, for a tooltip.
nlohmann::json tooltip_lines(const TrialRecord& t);

// The unit a Pareto chart of these sweeps draws memory in: the one the largest
// peak or memory limit on it reaches (a tiny model's chart reads MiB).
ByteUnit memory_axis_unit(std::span<const SweepData* const> sweeps);

// A point {x: peak in `unit`, y: tokens/s, z: ZeRO stage, t: tooltip lines}.
nlohmann::json pareto_point(const TrialRecord& t, ByteUnit unit);

// The front's points, by increasing peak memory.
nlohmann::json front_line(const SweepData& sweep, ByteUnit unit);

// {x: in `unit`, label} for the vertical line of a sweep's memory limit.
nlohmann::json memory_limit_line(const SweepData& sweep, ByteUnit unit);

inline constexpr std::size_t kMaxScatterPoints = 3000;

}  // namespace tune

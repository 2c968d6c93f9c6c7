// The HTML report: one self-contained file (Chart.js, the page's script and
// style, and the data all inline; a Content-Security-Policy that forbids every
// network request), readable without JavaScript because every number is also
// in a table. One sweep gives a report of it; several compare each of the
// others against the first.
//
//   Store db("tune.db", Store::Mode::read_only);
//   std::vector<std::string> sweeps{"h100", "a100"};
//   write_html_report(db, sweeps, "report.html");
#pragma once

#include <filesystem>
#include <span>
#include <string>

#include "reports/sweep_data.h"

namespace tune {

class Store;

// The page for sweeps already loaded (at least one).
std::string render_html_report(std::span<const SweepData> sweeps);

// Loads the named sweeps (the latest one when `sweeps` is empty) and renders them.
// Throws ConfigError for an unknown sweep.
std::string html_report(const Store& store, std::span<const std::string> sweeps);

// html_report written to `out` through a temporary file renamed into place, so a
// reader never sees half a report. Throws ReportError when the file cannot be written.
void write_html_report(const Store& store, std::span<const std::string> sweeps, const std::filesystem::path& out);

// The Content-Security-Policy every report carries: nothing may be fetched.
std::string report_content_security_policy();

}  // namespace tune

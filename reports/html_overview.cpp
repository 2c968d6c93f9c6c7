// The report's header: what was swept, where, with what software, and when.
#include <functional>

#include <fmt/format.h>

#include "reports/html_sections.h"
#include "reports/makespan_text.h"
#include "reports/report_format.h"
#include "store/timestamp.h"

namespace tune {
namespace {

struct OverviewRow {
    std::string label;
    std::function<std::string(const SweepData&)> value;
};

std::string model_text(const SweepData& s) {
    if (s.trials.empty()) return "unknown (no trials)";
    const ModelSpec& m = s.trials.front().result.config.model;
    return fmt::format("{} ({} parameters, {} layers, hidden {})", m.name,
                       count_text(static_cast<double>(m.param_count())), m.layers, m.hidden);
}

std::string device_text(const SweepData& s) {
    const DeviceInfo& d = s.summary.record.device;
    return fmt::format("{} x {} ({} each)", d.count, d.name.empty() ? "unknown device" : d.name,
                       bytes_text(d.memory_bytes));
}

std::string software_text(const SweepData& s) {
    const SoftwareVersions& v = s.summary.record.software;
    std::string out = fmt::format("tune {} ({})", v.tune_version, v.git_commit);
    if (!v.cuda.empty()) out += ", CUDA " + v.cuda;
    if (!v.nccl.empty()) out += ", NCCL " + v.nccl;
    if (!v.driver.empty()) out += ", driver " + v.driver;
    return out;
}

std::vector<OverviewRow> rows() {
    return {{"sweep", [](const SweepData& s) { return s.name(); }},
            {"model", model_text},
            {"host", [](const SweepData& s) { return s.summary.record.host; }},
            {"devices", device_text},
            {"memory limit", [](const SweepData& s) { return bytes_text(s.memory_limit); }},
            {"backend", [](const SweepData& s) { return s.summary.record.backend; }},
            {"software", software_text},
            {"started", [](const SweepData& s) { return format_timestamp(s.summary.record.created_at); }},
            {"spec hash", [](const SweepData& s) { return s.summary.record.spec_hash; }},
            {"trials", [](const SweepData& s) { return std::to_string(s.summary.total()); }},
            {"makespan", makespan_text}};
}

}  // namespace

void write_overview_section(HtmlWriter& html, std::span<const SweepData> sweeps) {
    open_section(html, "overview", sweeps.size() == 1 ? "Overview" : "Sweeps compared");
    html.open("div", {{"class", "table-wrap"}}).open("table", {{"class", "overview"}}).open("tbody");
    for (const auto& row : rows()) {
        html.open("tr").element("th", row.label, {{"scope", "row"}});
        for (const auto& s : sweeps) html.element("td", row.value(s));
        html.close("tr");
    }
    html.close("tbody").close("table").close("div");
    html.element("p", "Report written " + format_timestamp(now_timestamp()) + ".", {{"class", "note"}});
    html.close("section");
}

}  // namespace tune

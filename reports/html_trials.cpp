// Every trial of a sweep in one table: sortable, filterable and paged by the
// page's script, complete in the HTML for readers without JavaScript.
#include <algorithm>

#include <fmt/format.h>

#include "reports/accuracy.h"
#include "reports/html_sections.h"
#include "reports/html_table.h"
#include "reports/report_format.h"

namespace tune {
namespace {

// A reason shows as one line cut by the style sheet; the cell holds its first
// kReasonChars bytes and, when that may be cut, the first kReasonTitleChars on hover.
constexpr std::size_t kReasonChars = 160;
constexpr std::size_t kReasonTitleChars = 1000;
constexpr std::size_t kReasonVisibleChars = 40;

// At most `limit` bytes, cut on a UTF-8 boundary.
std::string shortened(const std::string& text, std::size_t limit) {
    if (text.size() <= limit) return text;
    std::size_t cut = limit;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    return text.substr(0, cut) + "...";
}

HtmlCell reason_cell(const std::string& reason) {
    return {shortened(reason, kReasonChars), "reason", "",
            reason.size() > kReasonVisibleChars ? shortened(reason, kReasonTitleChars) : ""};
}

// The reason beside the status, where it is read, rather than past twenty columns.
// host: the sweep offloads somewhere, so its host ledger (per rank) gets two columns.
std::vector<HtmlColumn> trial_columns(bool host) {
    std::vector<HtmlColumn> columns{
        {"trial", true, ""},
        {"status", false, ""},
        {"reason", false, "why a trial did not finish ok; hover or click for the whole text"}};
    for (auto& c : config_columns()) columns.push_back(std::move(c));
    columns.insert(columns.end(),
                   {{"peak", true, "measured peak memory per GPU: the allocator's, baseline included"},
                    {"real peak", true, kRealPeakTitle},
                    {"tokens/s", true, "measured, warmup excluded"},
                    {"MFU %", true, ""},
                    {"est. peak", true, "the estimator's prediction"},
                    {"est. tokens/s", true, "the estimator's prediction"},
                    {"mem err", true, "(estimated - measured) / measured peak: the real peak where measured"}});
    if (host)
        columns.insert(columns.end(),
                       {{"host", true, "offload: measured host memory per rank (the host ledger's peak)"},
                        {"est. host", true, "offload: the estimator's host memory per rank"}});
    return columns;
}

std::vector<HtmlCell> trial_row(const TrialRecord& t, bool host) {
    const TrialResult& r = t.result;
    const bool ok = r.status == TrialStatus::ok && t.measured;
    std::vector<HtmlCell> row{{std::to_string(t.id), ""},
                              {std::string(to_string(r.status)), "st-" + std::string(to_string(r.status))},
                              reason_cell(r.reason)};
    for (auto& c : config_cells(r.config)) row.push_back({std::move(c), ""});
    row.push_back(t.measured && r.memory.peak ? bytes_cell(r.memory.peak) : HtmlCell{});
    row.push_back(t.measured && r.real_peak ? bytes_cell(r.real_peak) : HtmlCell{});
    row.push_back(ok ? throughput_cell(r.tokens_per_s) : HtmlCell{});
    row.push_back({ok ? fmt::format("{:.1f}", r.mfu * 100) : "", ""});
    row.push_back(r.estimate ? bytes_cell(r.estimate->memory.peak) : HtmlCell{});
    row.push_back(r.estimate ? throughput_cell(r.estimate->tokens_per_s) : HtmlCell{});
    const std::optional<double> error = ok ? peak_error(r) : std::nullopt;
    row.push_back({error ? percent_text(*error) : "", ""});
    if (host) {
        row.push_back(t.measured && r.host_memory.peak ? bytes_cell(r.host_memory.peak) : HtmlCell{});
        row.push_back(r.estimate && r.estimate->host_memory.peak ? bytes_cell(r.estimate->host_memory.peak)
                                                                 : HtmlCell{});
    }
    return row;
}

}  // namespace

void write_trials_section(HtmlWriter& html, PageData& page, const SweepData& sweep, const std::string& prefix) {
    open_section(html, prefix + "trials", fmt::format("All trials ({})", sweep.trials.size()));
    const bool host = std::any_of(sweep.trials.begin(), sweep.trials.end(),
                                  [](const TrialRecord& t) { return t.result.config.offload != Offload::none; });
    HtmlTable table(trial_columns(host));
    for (const auto& t : sweep.trials) table.add_row(trial_row(t, host));
    table.write(html, prefix + "trials-table", "The sweep has no trials yet.", page);
    html.close("section");
}

}  // namespace tune

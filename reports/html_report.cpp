#include "reports/html_report.h"

#include <fmt/format.h>

#include "core/output_file.h"
#include "reports/html_escape.h"
#include "reports/html_sections.h"
#include "reports/report_assets.h"
#include "reports/report_error.h"
#include "reports/sha256.h"
#include "store/store.h"

namespace tune {
namespace {

std::string title_of(std::span<const SweepData> sweeps) {
    std::string names;
    for (const auto& s : sweeps) names += (names.empty() ? "" : " vs ") + s.name();
    return "tune report: " + names;
}

void write_head(HtmlWriter& html, std::span<const SweepData> sweeps) {
    html.open("head");
    html.empty("meta", {{"charset", "utf-8"}});
    // First in <head>, before anything that could load.
    html.empty("meta", {{"http-equiv", "Content-Security-Policy"}, {"content", report_content_security_policy()}});
    html.empty("meta", {{"name", "referrer"}, {"content", "no-referrer"}});
    html.empty("meta", {{"name", "viewport"}, {"content", "width=device-width, initial-scale=1"}});
    html.element("title", title_of(sweeps));
    html.open("style").raw(report_assets::report_css).close("style");
    // Before Chart.js and the report's script, so their errors are recorded too.
    html.open("script").raw(report_assets::boot_js).close("script");
    html.close("head");
}

void write_nav(HtmlWriter& html, std::span<const SweepData> sweeps) {
    html.open("nav", {{"aria-label", "contents"}}).open("ul");
    const auto link = [&](const std::string& id, const std::string& text) {
        html.open("li").element("a", text, {{"href", "#" + id}}).close("li");
    };
    link("what-to-run", "what to run");
    link("overview", "overview");
    link("funnel", "funnel");
    for (std::size_t i = 1; i < sweeps.size(); ++i)
        link(fmt::format("cmp{}-comparison", i), "comparison: " + sweeps[i].name());
    for (std::size_t i = 0; i < sweeps.size(); ++i) {
        const std::string p = fmt::format("s{}-", i);
        const std::string suffix = sweeps.size() > 1 ? " (" + sweeps[i].name() + ")" : "";
        link(p + "pareto", "Pareto front" + suffix);
        link(p + "predicted", "predicted front" + suffix);
        link(p + "breakdown", "memory breakdown" + suffix);
        link(p + "accuracy", "estimator accuracy" + suffix);
        link(p + "effects", "dimensions" + suffix);
        link(p + "trials", "all trials" + suffix);
    }
    html.close("ul").close("nav");
}

void write_sweep(HtmlWriter& html, PageData& page, const SweepData& sweep, std::size_t index, bool several) {
    const std::string p = fmt::format("s{}-", index);
    html.open("article", {{"id", fmt::format("s{}", index)}, {"class", "sweep"}});
    if (several) html.element("h2", "Sweep " + sweep.name(), {{"class", "sweep-title"}});
    write_pareto_section(html, page, sweep, p);
    write_predicted_section(html, page, sweep, p);
    write_breakdown_section(html, page, sweep, p);
    write_accuracy_section(html, page, sweep, p);
    write_effects_section(html, page, sweep, p);
    write_trials_section(html, page, sweep, p);
    html.close("article");
}

void write_body(HtmlWriter& html, std::span<const SweepData> sweeps) {
    PageData page;
    HtmlWriter main;
    write_what_to_run_section(main, sweeps);
    write_overview_section(main, sweeps);
    write_funnel_section(main, sweeps);
    for (std::size_t i = 1; i < sweeps.size(); ++i)
        write_comparison_section(main, page, sweeps[0], sweeps[i], fmt::format("cmp{}-", i));
    for (std::size_t i = 0; i < sweeps.size(); ++i) write_sweep(main, page, sweeps[i], i, sweeps.size() > 1);

    html.open("body", {{"data-charts", std::to_string(page.charts.size())}});
    html.open("header", {{"class", "page"}}).element("h1", title_of(sweeps));
    write_nav(html, sweeps);
    html.close("header");
    html.element("noscript",
                 "JavaScript is off: the charts are not drawn, and every table shows all of its rows, unsorted.");
    html.element("pre", "", {{"id", "report-errors"}, {"class", "errors"}, {"hidden", "hidden"}});
    html.open("main").raw(main.str()).close("main");
    html.open("script", {{"type", "application/json"}, {"id", "report-data"}})
        .raw(json_for_script({{"charts", std::move(page.charts)}, {"tables", std::move(page.tables)}}))
        .close("script");
    html.open("script").raw(report_assets::chart_js).close("script");
    html.open("script").raw(report_assets::report_js).close("script");
    html.close("body");
}

}  // namespace

std::string report_content_security_policy() {
    // No source of any kind may be fetched. Scripts run only when their text
    // hashes to one of the page's own three, so markup that slipped past the
    // escaping still could not run; the JSON data element is not executed.
    static const std::string policy =
        "default-src 'none'; script-src " + csp_hash_source(report_assets::boot_js) + " " +
        csp_hash_source(report_assets::chart_js) + " " + csp_hash_source(report_assets::report_js) +
        "; style-src 'unsafe-inline'; img-src 'none'; connect-src 'none'; font-src 'none'; base-uri 'none'; "
        "form-action 'none'";
    return policy;
}

std::string render_html_report(std::span<const SweepData> sweeps) {
    if (sweeps.empty()) throw ReportError("a report needs at least one sweep");
    HtmlWriter html;
    html.raw("<!DOCTYPE html>\n").open("html", {{"lang", "en"}});
    write_head(html, sweeps);
    write_body(html, sweeps);
    html.close("html").raw("\n");
    return html.take();
}

std::string html_report(const Store& store, std::span<const std::string> sweeps) {
    const auto names = resolve_sweep_names(store, sweeps);
    const auto data = load_sweeps(store, names);
    return render_html_report(data);
}

void write_html_report(const Store& store, std::span<const std::string> sweeps, const std::filesystem::path& out) {
    write_output_file(out, html_report(store, sweeps), "the report");
}

}  // namespace tune

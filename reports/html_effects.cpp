// The effect of each dimension: a small table per searched dimension, and
// throughput and peak memory against context length, one curve per value of
// each dimension the dimension table marks curves_over_context.
#include <algorithm>

#include <fmt/format.h>

#include "reports/dimension_effects.h"
#include "reports/html_chart.h"
#include "reports/html_sections.h"
#include "reports/html_table.h"
#include "reports/report_format.h"

namespace tune {
namespace {

template <typename T, typename F>
nlohmann::json values_or_null(const std::vector<std::optional<T>>& values, F convert) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : values) out.push_back(v ? nlohmann::json(convert(*v)) : nlohmann::json());
    return out;
}

// The unit of a memory curve: the one its largest value reaches.
ByteUnit curves_unit(const ContextEffect& e) {
    std::uint64_t largest = 0;
    for (const auto& c : e.curves)
        for (const auto& v : c.min_peak)
            if (v) largest = std::max(largest, *v);
    return byte_unit_for(largest);
}

nlohmann::json curves_spec(const ContextEffect& e, bool memory) {
    const ByteUnit unit = curves_unit(e);
    nlohmann::json series = nlohmann::json::array();
    for (const auto& c : e.curves) {
        nlohmann::json values = memory
                                    ? values_or_null(c.min_peak, [unit](std::uint64_t b) { return in_unit(b, unit); })
                                    : values_or_null(c.best_tokens_per_s, [](double v) { return v; });
        series.push_back({{"label", c.label}, {"values", std::move(values)}});
    }
    return {{"kind", "lines"},
            {"x", e.contexts},
            {"x_label", "context length (tokens)"},
            {"y_label", memory ? fmt::format("smallest peak ({})", unit.name) : std::string("best tokens/s")},
            {"series", std::move(series)}};
}

void write_curves(HtmlWriter& html, PageData& page, const SweepData& sweep, const std::string& prefix,
                  const Dimension& group) {
    const ContextEffect e = context_effect(sweep, group);
    const std::string by = e.grouped_by;
    write_chart(html, page, prefix + "effect-tokens-" + by, curves_spec(e, false),
                "Best tokens/s at each context length, per " + by + " (trials that finished).");
    write_chart(html, page, prefix + "effect-memory-" + by, curves_spec(e, true),
                "Smallest peak memory at each context length, per " + by + ".");
}

HtmlTable dimension_table(const DimensionEffect& d) {
    HtmlTable t({{d.dimension, false, ""},
                 {"trials", true, "all statuses"},
                 {"ok", true, ""},
                 {"oom", true, ""},
                 {"best tokens/s", true, "among trials that finished"},
                 {"min peak", true, "among trials that finished"}});
    for (const auto& v : d.values)
        t.add_row({{v.value, ""},
                   {std::to_string(v.trials), ""},
                   {std::to_string(v.ok), ""},
                   {std::to_string(v.oom), ""},
                   v.best_tokens_per_s ? throughput_cell(*v.best_tokens_per_s) : HtmlCell{},
                   v.min_peak ? bytes_cell(*v.min_peak) : HtmlCell{}});
    return t;
}

}  // namespace

void write_effects_section(HtmlWriter& html, PageData& page, const SweepData& sweep, const std::string& prefix) {
    open_section(html, prefix + "effects", "Effect of each dimension");
    html.open("div", {{"class", "chart-grid"}});
    for (const Dimension& d : dimensions())
        if (d.curves_over_context) write_curves(html, page, sweep, prefix, d);
    html.close("div");
    html.open("div", {{"class", "dimension-grid"}});
    for (const auto& d : dimension_effects(sweep)) dimension_table(d).write(html, "", false, "");
    html.close("div");
    html.close("section");
}

}  // namespace tune

#include "reports/makespan_text.h"

#include <fmt/format.h>

#include "core/units.h"

namespace tune {

std::optional<double> real_makespan_s(const SweepData& sweep) {
    std::optional<Timestamp> first, last;
    for (const TrialRecord& t : sweep.trials) {
        if (!t.started_at || !t.ended_at) continue;
        if (!first || *t.started_at < *first) first = t.started_at;
        if (!last || *t.ended_at > *last) last = t.ended_at;
    }
    if (!first) return std::nullopt;
    return std::chrono::duration<double>(*last - *first).count();
}

std::string makespan_text(const SweepData& sweep) {
    const nlohmann::json& plan = sweep.summary.record.plan;
    if (!plan.is_object() || !plan.contains("makespan") || !plan["makespan"].is_object()) return "-";
    const nlohmann::json& m = plan["makespan"];
    const double predicted = m.value("predicted_s", 0.0);
    std::string out = fmt::format("predicted {} ({} at a time)", format_duration(predicted), m.value("slots", 1));
    const auto real = real_makespan_s(sweep);
    if (!real) return out + ", not run yet";
    out += fmt::format(", real {}", format_duration(*real));
    if (*real > 0) out += fmt::format(": {:+.1f}%", 100.0 * (predicted - *real) / *real);
    return out;
}

}  // namespace tune

#include "core/step_statistics.h"

#include <algorithm>
#include <cmath>

namespace tune {

double median_of(std::vector<double> values) {
    std::erase_if(values, [](double v) { return !std::isfinite(v); });
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    const std::size_t mid = values.size() / 2;
    return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

StepStatistics step_statistics(const std::vector<double>& step_ms, std::size_t warmup) {
    std::vector<double> t;
    for (std::size_t i = warmup; i < step_ms.size(); ++i)
        if (std::isfinite(step_ms[i])) t.push_back(step_ms[i]);
    StepStatistics s;
    s.count = t.size();
    if (t.empty()) return s;
    double sum = 0;
    for (double v : t) sum += v;
    s.mean_ms = sum / static_cast<double>(t.size());
    s.median_ms = median_of(t);
    if (t.size() > 1) {
        double squares = 0;
        for (double v : t) squares += (v - s.mean_ms) * (v - s.mean_ms);
        s.stddev_ms = std::sqrt(squares / static_cast<double>(t.size() - 1));
    }
    s.cv = s.mean_ms > 0 ? s.stddev_ms / s.mean_ms : 0;
    return s;
}

void to_json(nlohmann::json& j, const StepStatistics& s) {
    j = nlohmann::json{{"count", s.count},
                       {"mean_ms", s.mean_ms},
                       {"median_ms", s.median_ms},
                       {"stddev_ms", s.stddev_ms},
                       {"cv", s.cv}};
}

void from_json(const nlohmann::json& j, StepStatistics& s) {
    s.count = j.value("count", std::size_t{0});
    s.mean_ms = j.value("mean_ms", 0.0);
    s.median_ms = j.value("median_ms", 0.0);
    s.stddev_ms = j.value("stddev_ms", 0.0);
    s.cv = j.value("cv", 0.0);
}

}  // namespace tune

#include "core/step_statistics.h"

#include <algorithm>
#include <cmath>

namespace tune {

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
    std::sort(t.begin(), t.end());
    const std::size_t mid = t.size() / 2;
    s.median_ms = t.size() % 2 ? t[mid] : (t[mid - 1] + t[mid]) / 2;
    if (t.size() > 1) {
        double squares = 0;
        for (double v : t) squares += (v - s.mean_ms) * (v - s.mean_ms);
        s.stddev_ms = std::sqrt(squares / static_cast<double>(t.size() - 1));
    }
    s.cv = s.mean_ms > 0 ? s.stddev_ms / s.mean_ms : 0;
    return s;
}

void to_json(nlohmann::json& j, const StepStatistics& s) {
    j = nlohmann::json{{"count", s.count}, {"mean_ms", s.mean_ms}, {"median_ms", s.median_ms},
                       {"stddev_ms", s.stddev_ms}, {"cv", s.cv}};
}

void from_json(const nlohmann::json& j, StepStatistics& s) {
    s.count = j.value("count", std::size_t{0});
    s.mean_ms = j.value("mean_ms", 0.0);
    s.median_ms = j.value("median_ms", 0.0);
    s.stddev_ms = j.value("stddev_ms", 0.0);
    s.cv = j.value("cv", 0.0);
}

}  // namespace tune

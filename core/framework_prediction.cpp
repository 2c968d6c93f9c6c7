#include "core/framework_prediction.h"

namespace tune {

void to_json(nlohmann::json& j, const FrameworkPrediction& p) {
    if (!p.invalid.empty()) {
        j = {{"invalid", p.invalid}};
        return;
    }
    j = {{"allocated", p.allocated}, {"reserved", p.reserved},         {"device", p.device},
         {"step_s", p.step_s},       {"tokens_per_s", p.tokens_per_s}, {"fits", p.fits}};
    if (p.host > 0) j["host"] = p.host;  // offload only: rows without it read as 0
}

void from_json(const nlohmann::json& j, FrameworkPrediction& p) {
    p = {};
    if (j.contains("invalid")) {
        p.invalid = j.at("invalid").get<std::string>();
        return;
    }
    p.allocated = j.at("allocated").get<std::uint64_t>();
    p.reserved = j.at("reserved").get<std::uint64_t>();
    p.device = j.at("device").get<std::uint64_t>();
    p.step_s = j.at("step_s").get<double>();
    p.tokens_per_s = j.at("tokens_per_s").get<double>();
    p.fits = j.at("fits").get<bool>();
    p.host = j.value("host", std::uint64_t{0});
}

std::optional<FrameworkPredictions> parse_framework_predictions(const std::string& text) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object()) return std::nullopt;
    try {
        return j.get<FrameworkPredictions>();
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

}  // namespace tune

#include "exports/expressible.h"

namespace tune {

std::optional<std::string> inexpressible(Framework f, const TrialConfig& c) {
    try {
        const FrameworkExport e = export_config(f, c);
        if (!e.cannot_express.empty()) return e.cannot_express.front();
    } catch (const ExportRefused& refused) {
        return std::string(refused.what());
    }
    return std::nullopt;
}

}  // namespace tune

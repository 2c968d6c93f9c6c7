// Whether a target writes a configuration exactly: it can run it (no ExportRefused) and its export
// says of nothing that the framework cannot express it (FrameworkExport::cannot_express). `tune best
// --emit F` ranks out what F cannot write exactly, so the file it prints runs what tune measured or
// predicted. The reason is the export's own refusal or note, so the rule lives in the export alone.
#pragma once

#include <optional>
#include <string>

#include "core/config.h"
#include "exports/framework.h"

namespace tune {

// Why `f` cannot write `c` exactly (the refusal, or the first of what it cannot express); nullopt
// when it can.
std::optional<std::string> inexpressible(Framework f, const TrialConfig& c);

}  // namespace tune

// One configuration written for one framework, with what the framework cannot
// express of it, what the training script sets instead, and the memory the
// framework is known to add over tune's engine.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "core/config_error.h"

namespace tune {

struct FrameworkExport {
    std::string body;  // the file (JSON or YAML) or the command line
    // What of this configuration the framework has no setting for, so that what it runs is not what
    // tune measured: `tune best --emit` ranks such a configuration out (exports/expressible.h).
    std::vector<std::string> cannot_express;
    // What the framework has no setting for in any configuration (LitGPT's learning-rate schedule):
    // said as cannot_express is, but no reason to rank one configuration out, since none avoids it.
    std::vector<std::string> cannot_express_any;
    std::vector<std::string> in_script;     // what the training script sets instead (exports/model_setup)
    std::vector<std::string> memory_added;  // what the framework is known to hold beyond tune's engine
    std::vector<std::string> risks;  // reasons to check the configuration before training (core/convergence_risk)
    bool json = false;               // body is JSON, which has no comments: notes go beside it
};

// The framework cannot run the configuration as tune measured it (it would
// fail, or silently train something else); the message says why and what to
// choose instead. A ConfigError: `tune best --emit` and `tune export --emit`
// exit 2 with it.
class ExportRefused : public ConfigError {
public:
    using ConfigError::ConfigError;
};

}  // namespace tune

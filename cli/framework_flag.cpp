#include "cli/framework_flag.h"

#include "exports/framework.h"

namespace tune::cli {

std::vector<std::string> framework_flag_choices() {
    std::vector<std::string> names(kFrameworkProfileNames.begin(), kFrameworkProfileNames.end());
    names.emplace_back(to_string(Framework::accelerate_fsdp1));
    return names;
}

FrameworkProfile framework_flag_profile(const std::string& name) {
    if (name.empty()) return FrameworkProfile::tune;
    if (auto p = parse_framework_profile(name)) return *p;
    return profile_of(*parse_framework(name));  // the flag takes only framework_flag_choices()
}

}  // namespace tune::cli

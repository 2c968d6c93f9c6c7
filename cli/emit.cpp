#include "cli/emit.h"

#include <fmt/format.h>

#include "exports/framework.h"

namespace tune::cli {

CLI::Option* add_emit_flag(CLI::App* cmd, std::string& target) {
    return cmd->add_option("--emit", target,
                           "Write the chosen configuration for a framework: deepspeed (ds_config JSON), "
                           "accelerate-fsdp (accelerate config YAML with its TrainingArguments), torchrun (a command "
                           "line), hf-trainer (TrainingArguments JSON); with what it cannot express and the memory "
                           "it adds")
        ->check(CLI::IsMember(std::vector<std::string>(kFrameworkNames.begin(), kFrameworkNames.end())));
}

void print_emit(const std::string& framework, const TrialConfig& c, const std::string& chosen) {
    const Framework f = *parse_framework(framework);  // the flag accepts only the names
    const RenderedExport r = render(export_config(f, c), f);
    if (!r.notes.empty()) fmt::print(stderr, "# {}\n{}", chosen, r.notes);
    else fmt::print("# {}\n", chosen);
    fmt::print("{}", r.out);
}

}  // namespace tune::cli

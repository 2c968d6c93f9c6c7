#include "cli/emit.h"

#include <fmt/format.h>

#include "exports/framework.h"
#include "exports/yaml_text.h"

namespace tune::cli {

CLI::Option* add_emit_flag(CLI::App* cmd, std::string& target) {
    return cmd
        ->add_option("--emit", target,
                     "Write the chosen configuration for a framework: deepspeed (ds_config JSON), "
                     "accelerate-fsdp (accelerate config YAML, FSDP2, DDP for ZeRO-0, with its "
                     "TrainingArguments), accelerate-fsdp1 (the same with FSDP1), torchrun (a command line), "
                     "hf-trainer (TrainingArguments JSON), torchtitan (job-config TOML), litgpt (fine-tuning config "
                     "YAML), megatron (a Megatron-LM pretrain_gpt.py command line, tensor parallelism included); with "
                     "what it cannot express, what your script sets "
                     "and the memory it adds. A configuration the framework cannot run is refused (exit 2) "
                     "with the reason")
        ->check(CLI::IsMember(std::vector<std::string>(kFrameworkNames.begin(), kFrameworkNames.end())));
}

void print_emit(const std::string& framework, const TrialConfig& c, const std::string& chosen) {
    const Framework f = *parse_framework(framework);  // the flag accepts only the names
    const RenderedExport r = render(export_config(f, c), f);
    // `chosen` carries names from the database: one line, so nothing in them reads as YAML or runs as shell.
    if (!r.notes.empty())
        fmt::print(stderr, "# {}\n{}", one_line(chosen), r.notes);
    else
        fmt::print("# {}\n", one_line(chosen));
    fmt::print("{}", r.out);
}

}  // namespace tune::cli

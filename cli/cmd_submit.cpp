// `tune submit FILE.toml`: the sweep as a Slurm batch job. The script runs
// `tune sweep` in the allocation (trials become `srun --exact` job steps that
// share it, see driver/slots), is requeueable (a requeued job starts the script
// again and the sweep resumes from its database), and asks Slurm for SIGINT
// before the time limit, which `tune sweep` reads as "start no more trials, let
// the running ones finish".
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/config_error.h"
#include "core/output_file.h"
#include "core/units.h"
#include "launch/launch.h"
#include "launch/process.h"
#include "reports/text_table.h"
#include "sweep/spec.h"

namespace tune::cli {
namespace {

namespace fs = std::filesystem;

struct SubmitOptions {
    std::string file;
    std::uint32_t nodes = 0;  // 0: the sweep's [resources] nodes, else [hardware] nodes
    std::string partition;
    std::string time = "8h";
    std::string account;
    std::string db;
    bool dry_run = false;
    bool probe = true;
};

// Slurm's D-HH:MM:SS.
std::string slurm_time(double seconds) {
    const auto s = static_cast<std::uint64_t>(std::ceil(seconds));
    return fmt::format("{}-{:02}:{:02}:{:02}", s / 86400, s % 86400 / 3600, s % 3600 / 60, s % 60);
}

std::string quoted(const std::string& text) {
    std::string out = "'";
    for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

// A name the script derives from the sweep's (job name, log and script file): every character
// outside [A-Za-z0-9._-] becomes '_', so no name adds a line, an option or a path to the script.
std::string slurm_word(std::string_view name) {
    std::string out;
    for (char c : name)
        out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ? c : '_';
    return out.empty() ? std::string("_") : out;
}

// A value the user gives for an #SBATCH line, which sbatch reads up to the first space and no
// shell quotes: refused unless it is a Slurm name (a comma-separated list for partitions).
void require_slurm_value(std::string_view flag, const std::string& value) {
    for (char c : value)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || c == ','))
            throw ConfigError(
                fmt::format("{} {}: a Slurm name has only letters, digits and . _ - , (no spaces, quotes "
                            "or control characters)",
                            flag, printable(value, " ")));
}

std::string batch_script(const SweepSpec& spec, const SubmitOptions& o, double limit_s) {
    const std::uint32_t nodes = o.nodes ? o.nodes : spec.resources.nodes.value_or(spec.nodes);
    const std::string job = slurm_word(spec.name);
    // Time to let the running trials finish once Slurm says the end is near.
    const auto grace = static_cast<std::uint64_t>(std::clamp(spec.trial.timeout_s + 60.0, 60.0, 65535.0));
    std::string s = "#!/bin/bash\n";
    s += fmt::format("#SBATCH --job-name=tune-{}\n", job);
    s += fmt::format("#SBATCH --nodes={}\n", nodes);
    s += fmt::format("#SBATCH --time={}\n", slurm_time(limit_s));
    if (!o.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", o.partition);
    if (!o.account.empty()) s += fmt::format("#SBATCH --account={}\n", o.account);
    // The whole nodes: the sweep shares them out among concurrent trials itself.
    s += "#SBATCH --exclusive\n";
    if (spec.hardware.backend == BackendKind::cuda)
        s += fmt::format("#SBATCH --gpus-per-node={}\n", spec.resources.gpus_per_node.value_or(spec.gpus));
    s += "#SBATCH --requeue\n#SBATCH --open-mode=append\n";
    s += fmt::format("#SBATCH --output=tune-{}-%j.log\n", job);
    s += fmt::format("#SBATCH --signal=B:INT@{}\n", grace);
    s += "# Requeued, the job runs this script again and the sweep resumes from its database.\n";
    s += "# SIGINT near the limit: tune starts no more trials and lets the running ones finish.\n";
    s += fmt::format("cd {}\n", quoted(fs::current_path().string()));
    std::string command =
        fmt::format("exec {} sweep {}", quoted(self_executable()), quoted(fs::absolute(o.file).string()));
    if (!o.db.empty()) command += " --db " + quoted(o.db);
    if (!o.probe) command += " --no-probe";
    return s + command + "\n";
}

int run_submit(const SubmitOptions& o) {
    require_slurm_value("--partition", o.partition);
    require_slurm_value("--account", o.account);
    const SweepSpec spec = load_sweep(o.file);
    const auto limit = parse_duration(o.time);
    // Slurm's D-HH:MM:SS would wrap a limit past the days it can count (1e300h read as 0:00:00, no limit).
    constexpr double kLongestJobS = 365.0 * 86400;
    if (!limit || !(*limit > 0) || *limit > kLongestJobS)
        throw ConfigError(
            fmt::format("--time {}: not a duration from 1s to 365d; write e.g. 8h, 90m or 1d", printable(o.time, " ")));
    const std::string script = batch_script(spec, o, *limit);
    if (o.dry_run) {
        fmt::print("{}", script);
        return kExitOk;
    }
    const fs::path path = fmt::format("tune-{}.sbatch", slurm_word(spec.name));
    write_output_file(path, script, "the batch script");
    ProcessSpec sbatch;
    sbatch.argv = {"sbatch", "--parsable", path.string()};
    sbatch.timeout_s = 120;
    const ProcessOutcome out = run_process(sbatch);
    if (out.exit_code != 0) {
        fmt::print(stderr, "sbatch {} failed ({}): {}\n", path.string(), out.describe(), out.stderr_tail);
        return kExitNo;
    }
    std::string id = out.stdout_text.substr(0, out.stdout_text.find_first_of(";\n"));
    fmt::print("Submitted {} as job {}\nScript: {}\nFollow it: tune status --db {}\n", printable(spec.name), id,
               path.string(), o.db.empty() ? spec.database : o.db);
    return kExitOk;
}

}  // namespace

void add_submit_command(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand(
        "submit",
        "Submit a sweep as a Slurm batch job: writes tune-NAME.sbatch, which runs `tune sweep FILE` in the\n"
        "allocation (each trial an `srun --exact` job step, several at once as [resources] allow), resumes\n"
        "when the job is requeued, and stops starting trials before the time limit. Prints the job id.\n"
        "  tune submit sweeps/llama7b.toml --nodes 2 --partition gpu --time 8h\n"
        "  tune submit sweeps/demo.toml --dry-run      # show the script, submit nothing");
    auto o = std::make_shared<SubmitOptions>();
    cmd->add_option("file", o->file, "Sweep file (TOML)")->required();
    without_default(
        cmd->add_option("--nodes", o->nodes, "Nodes to allocate (default: [resources] nodes, else [hardware] nodes)"))
        ->check(CLI::Range(1, 4096));
    cmd->add_option("--partition", o->partition, "Slurm partition");
    cmd->add_option("--time", o->time, "Time limit, e.g. 8h, 90m, 1d (default 8h)");
    cmd->add_option("--account", o->account, "Slurm account to charge");
    cmd->add_option("--db", o->db, "Results database (default: the sweep's [output] database)");
    cmd->add_flag("--dry-run", o->dry_run, "Print the batch script instead of submitting it");
    cmd->add_flag("!--no-probe", o->probe, "The job's sweep runs without probes (`tune sweep --no-probe`)");
    cmd->callback([&exit_code, o] { exit_code = run_submit(*o); });
}

}  // namespace tune::cli

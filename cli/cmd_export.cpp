// `tune export`: every trial with its estimates and measurements, as CSV (one
// row per trial, RFC 4180 quoting) or JSON (with step series and sweeps).
#include <charconv>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/database_path.h"
#include "cli/emit.h"
#include "core/dimensions.h"
#include "core/parallel_plan.h"
#include "reports/accuracy.h"
#include "reports/text_table.h"
#include "store/record_json.h"
#include "store/store.h"

namespace tune::cli {
namespace {

struct ExportOptions {
    DatabaseFlags db;
    std::string sweep;
    std::string format;
    std::int64_t trial = 0;  // --trial N with --emit
    std::string emit;
};

// Quoted when it holds a separator, a quote or a line break; quotes doubled; formulas defused.
// Control characters other than a line break (which quoting keeps inside the field) are
// escaped like everywhere else tune prints: a CSV file is often read with `cat`.
// A text cell a spreadsheet would run as a formula (one starting with =, +, -, @, a tab or a
// carriage return) gets a leading ', as OWASP's CSV injection advice says; numbers, negative
// ones included, stay numbers.
bool formula_like(std::string_view text) {
    if (text.empty() || std::string_view("=+-@\t\r").find(text.front()) == std::string_view::npos) return false;
    double value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    return error != std::errc() || end != text.data() + text.size();
}

std::string csv_field(std::string_view raw) {
    const std::string text = (formula_like(raw) ? "'" : "") + printable(raw, "\n");
    if (text.find_first_of(",\"\r\n") == std::string_view::npos) return text;
    std::string out = "\"";
    for (char ch : text) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return out + "\"";
}

std::string number(double v) { return fmt::format("{}", v); }

template <typename T>
std::string opt(bool present, T value) {
    if (!present) return "";
    if constexpr (std::is_floating_point_v<T>)
        return number(value);
    else
        return fmt::format("{}", value);
}

std::vector<std::string> csv_header() {
    std::vector<std::string> h{"sweep", "trial_id", "config_hash", "status", "reason", "attempts", "model"};
    for (const Dimension& d : dimensions()) h.emplace_back(d.name);
    for (const char* m : {"world_size", "steps", "warmup", "seed", "est_peak_bytes", "est_peak_phase", "est_step_s",
                          "est_tokens_per_s", "est_mfu", "est_fits"})
        h.emplace_back(m);
    // Memory components follow the JSON paths estimate.memory.C and measured.memory.C (and the SQL
    // table trial_memory): a bare "{c}_bytes" would give "comm_bytes" twice, once for the bytes
    // the collectives moved and once for the communication buffers.
    for (Component c : kComponents) h.push_back(fmt::format("est_memory_{}_bytes", to_string(c)));
    for (const char* m : {"peak_bytes", "peak_phase", "tokens_per_s", "median_step_s", "mfu", "comm_bytes", "comm_s",
                          "oom_requested", "oom_live"})
        h.emplace_back(m);
    for (Component c : kComponents) h.push_back(fmt::format("memory_{}_bytes", to_string(c)));
    // The machine's view (largest over ranks), and the estimate's error against it.
    for (const char* m : {"real_peak", "baseline", "untracked", "est_real_peak_error"}) h.emplace_back(m);
    // The step-time noise over the timed steps (docs/store.md).
    for (const char* m : {"mean_step_s", "stddev_step_s", "step_cv", "timed_steps"}) h.emplace_back(m);
    // How fast the machine ran: the trial's speed reference and the probes', and the
    // exponent the estimate expected the step to follow their ratio with (core/machine_speed.h).
    for (const char* m : {"speed_reference_s", "est_speed_reference_s", "est_pace_exponent"}) h.emplace_back(m);
    for (const char* m : {"started_at", "ended_at", "config_json", "stderr_tail"}) h.emplace_back(m);
    return h;
}

std::vector<std::string> csv_row(const TrialRecord& t) {
    const TrialResult& r = t.result;
    const TrialConfig& c = r.config;
    std::vector<std::string> row{
        t.sweep_name, std::to_string(t.id),       t.config_hash, std::string(to_string(r.status)),
        r.reason,     std::to_string(t.attempts), c.model.name};
    for (const Dimension& d : dimensions()) row.push_back(d.text(c));
    for (auto v : {parallel_plan(c).world(), c.steps, c.warmup}) row.push_back(std::to_string(v));
    row.push_back(std::to_string(c.seed));
    const auto& e = r.estimate;
    const bool has_e = e.has_value();
    const Estimate est = e.value_or(Estimate{});
    for (auto& v : {opt(has_e, est.memory.peak), has_e ? est.memory.peak_phase : "", opt(has_e, est.step_s),
                    opt(has_e, est.tokens_per_s), opt(has_e, est.mfu), opt(has_e, est.fits ? 1 : 0)})
        row.push_back(v);
    for (Component comp : kComponents) row.push_back(opt(has_e, est.memory[comp]));
    const bool m = t.measured;
    for (auto& v : {opt(m, r.memory.peak), m ? r.memory.peak_phase : "", opt(m, r.tokens_per_s),
                    t.median_step_s ? number(*t.median_step_s) : "", opt(m, r.mfu), opt(m, r.comm_bytes),
                    opt(m, r.comm_s), opt(m, r.oom_requested), opt(m, r.oom_live)})
        row.push_back(v);
    for (Component comp : kComponents) row.push_back(opt(m, r.memory[comp]));
    const bool real = r.real_peak > 0;
    for (auto& v : {opt(real, r.real_peak), opt(real, r.baseline), opt(real, r.untracked),
                    real && has_e ? number(real_peak_error(est, r)) : ""})
        row.push_back(v);
    for (const auto& v : {t.mean_step_s, t.stddev_step_s, t.step_cv}) row.push_back(v ? number(*v) : "");
    row.push_back(t.timed_steps > 0 ? std::to_string(t.timed_steps) : "");
    for (double v : {r.speed_reference_s, est.speed_reference_s}) row.push_back(v > 0 ? number(v) : "");
    row.push_back(has_e && est.speed_reference_s > 0 ? number(est.pace_exponent) : "");
    row.push_back(t.started_at ? format_timestamp(*t.started_at) : "");
    row.push_back(t.ended_at ? format_timestamp(*t.ended_at) : "");
    row.push_back(nlohmann::json(c).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    row.push_back(t.stderr_tail);
    return row;
}

void print_csv_line(const std::vector<std::string>& fields) {
    std::string line;
    for (std::size_t i = 0; i < fields.size(); ++i) line += (i ? "," : "") + csv_field(fields[i]);
    fmt::print("{}\n", line);
}

// `--trial N --emit FRAMEWORK`: one stored configuration for a framework.
int run_emit(const ExportOptions& o, const Store& store) {
    if (o.trial <= 0) throw ConfigError("--emit needs --trial N (the trial id, as `tune best` and `tune list` show)");
    const auto t = store.trial(o.trial);
    if (!t) throw ConfigError(fmt::format("no trial {} in {}", o.trial, store.path()));
    print_emit(o.emit, t->result.config,
               fmt::format("trial {} of sweep {} ({})", t->id, t->sweep_name,
                           t->measured ? "measured " + std::string(to_string(t->result.status)) : "not measured"));
    return kExitOk;
}

int run_export(const ExportOptions& o) {
    const std::string db = reader_database(o.db);
    const Store store = Store::open_reader(db);
    if (!o.emit.empty()) return run_emit(o, store);
    if (o.format.empty()) throw ConfigError("--format is required (csv or json), or --trial N --emit FRAMEWORK");
    TrialQuery query{std::nullopt, std::nullopt, true, o.format == "json"};
    std::vector<SweepSummary> sweeps = store.sweeps();
    if (!o.sweep.empty()) {
        auto found = store.find_sweep(o.sweep);
        if (!found) throw ConfigError(fmt::format("no sweep named '{}' in {}", o.sweep, db));
        query.sweep = found->id;
        sweeps = {*found};
    }
    const auto trials = store.trials(query);
    if (o.format == "csv") {
        print_csv_line(csv_header());
        for (const auto& t : trials) print_csv_line(csv_row(t));
        return kExitOk;
    }
    nlohmann::json out{{"sweeps", nlohmann::json::array()}, {"trials", nlohmann::json::array()}};
    for (const auto& s : sweeps) out["sweeps"].push_back(sweep_json(s));
    for (const auto& t : trials) out["trials"].push_back(record_json(t));
    fmt::print("{}\n", dump_json(out));
    return kExitOk;
}

}  // namespace

void add_export_command(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("export", "Every trial with its estimates and measurements, as CSV or JSON.");
    auto o = std::make_shared<ExportOptions>();
    add_database_flags(cmd, o->db);
    cmd->add_option("--sweep", o->sweep, "Only this sweep (default: every sweep)");
    cmd->add_option("--format", o->format, "csv or json")->check(CLI::IsMember({"csv", "json"}));
    without_default(cmd->add_option("--trial", o->trial, "With --emit: the trial to write for a framework"));
    add_emit_flag(cmd, o->emit)->excludes("--format");
    cmd->callback([&exit_code, o] { exit_code = run_export(*o); });
}

}  // namespace tune::cli

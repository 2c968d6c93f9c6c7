// Fuzz group (label fuzz): hostile input to the surfaces that write files or
// read rows another program may have written, under the rules of
// tests/fuzz/fuzzer.h. Sweep names, partitions, accounts and times through
// `tune submit`; database text through every emit target; PEFT adapter files
// through `tune trial --init-adapter`; probe-cache and lease rows through
// `tune sweep` and `tune status`. Beyond exiting well, what tune writes must
// keep its shape: the batch script runs nothing it was given, and each emitted
// file parses in its format with one line per setting.
#include <catch2/catch.hpp>

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "exports/framework.h"
#include "launch/host_name.h"
#include "tests/fuzz/fuzzer.h"
#include "tests/support/tiny_cpu_sweep.h"

namespace fs = std::filesystem;
using namespace tune::fuzz;

namespace {

// Sweep "fz": the tiny model on the CPU (tests/support/tiny_cpu_sweep.toml), one configuration.
std::string fz_sweep() {
    return tune::test::tiny_cpu_sweep("fz", "[space]\ncontext = [64]\n[trial]\nsteps = 2\nwarmup = 1\n");
}

const fs::path kFakeTrial = kSource / "tests/support/fake_trial.py";

tune::ProcessOutcome run_plain(std::vector<std::string> argv, double timeout_s = 20) {
    tune::ProcessSpec spec;
    spec.argv = std::move(argv);
    spec.timeout_s = timeout_s;
    return tune::run_process(spec);
}

// A results database holding sweep "fz" with one measured trial and this host's probe cache.
fs::path measured_database(const Fuzzer& f) {
    const fs::path sweep = f.dir / "fz.toml", db = f.dir / "base.db";
    spit(sweep, fz_sweep());
    const auto out = run_plain({TUNE_BINARY, "sweep", "--no-report", "--db", db.string(), sweep.string()}, 120);
    INFO(out.stderr_tail);
    REQUIRE(out.exit_code == 0);
    return db;
}

// One statement with its values bound as the types they are; a constraint may refuse a
// hostile value, and the row then keeps what it had.
void write_row(const fs::path& db, const std::string& sql, const std::vector<nlohmann::json>& values) {
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open(db.c_str(), &h) == SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
    for (std::size_t i = 0; i < values.size(); ++i) {
        const int at = static_cast<int>(i) + 1;
        const nlohmann::json& v = values[i];
        if (v.is_null())
            sqlite3_bind_null(st, at);
        else if (v.is_number_float())
            sqlite3_bind_double(st, at, v.get<double>());
        else if (v.is_number_unsigned())
            sqlite3_bind_int64(st, at, static_cast<sqlite3_int64>(v.get<std::uint64_t>()));
        else if (v.is_number_integer())
            sqlite3_bind_int64(st, at, v.get<std::int64_t>());
        else if (v.is_boolean())
            sqlite3_bind_int(st, at, v.get<bool>() ? 1 : 0);
        else {
            const std::string text = v.is_string() ? v.get<std::string>() : v.dump();
            sqlite3_bind_text(st, at, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
        }
    }
    sqlite3_step(st);
    sqlite3_finalize(st);
    sqlite3_close(h);
}

// Control characters other than newline and tab, which no emitted file or script should carry.
bool has_control(const std::string& text) {
    for (const char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f) return true;
    }
    return false;
}

std::size_t line_count(const std::string& text) {
    return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("fuzz: hostile names, partitions, accounts and times through tune submit --dry-run", "[fuzz]") {
    Fuzzer f("submit");
    const fs::path sentinel = f.dir / "injected";
    const std::vector<std::string> times{"8h",    "90m", "1d", "1e300h", "18446744073709551616s",
                                         "1e19s", "-1h", "0",  "h",      "1d2h"};
    Mutator m(4011);
    int scripts = 0;  // written and checked: the fuzz reaches past the refusals
    const std::string tame_sweep = fz_sweep(), tables = tame_sweep.substr(tame_sweep.find('\n'));
    spit(f.dir / "plain.toml", tame_sweep);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 80; ++i) {
        const fs::path sweep = f.dir / fmt::format("s{}.toml", i);
        const std::string name = i % 3 == 0   ? m.hostile_text(sentinel)
                                 : i % 3 == 1 ? m.mutate("llama-sweep")
                                              : fmt::format("sweep-{}", i);
        const nlohmann::json quoted = name;
        spit(sweep, "name = " + quoted.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + tables);
        std::vector<std::string> args{"submit", sweep.string(), "--dry-run"};
        std::vector<std::string> plain{TUNE_BINARY, "submit", (f.dir / "plain.toml").string(), "--dry-run"};
        for (const char* flag : {"--partition", "--account", "--time"}) {
            if (m.below(2) == 0) continue;
            const bool time = std::string(flag) == "--time";
            const std::string value = m.below(3) == 0 ? m.hostile_text(sentinel)
                                      : time          ? times[m.below(times.size())]
                                                      : std::string(m.below(2) ? "gpu" : "ml_team-1");
            args.insert(args.end(), {flag, value});
            plain.insert(plain.end(), {flag, value.empty() ? "" : time ? "8h" : "p"});  // empty: no such line
        }
        const auto out = f.run(args, sweep);
        if (out.exit_code != 0) continue;
        ++scripts;
        std::string script = out.stdout_text;
        for (std::size_t at = script.find(TUNE_BINARY); at != std::string::npos; at = script.find(TUNE_BINARY, at))
            script.replace(at, std::string(TUNE_BINARY).size(), "/bin/true");
        const fs::path job = f.dir / "job.sbatch";
        spit(job, script);
        const auto ran = run_plain({"bash", job.string()});
        if (has_control(out.stdout_text) || run_plain({"bash", "-n", job.string()}).exit_code != 0 ||
            ran.exit_code != 0 || fs::exists(sentinel))
            f.reject(sweep, fmt::format("tune {} wrote a script that does not parse, fails or ran what it was "
                                        "given:\n{}\n{}",
                                        fmt::join(args, " "), out.stdout_text, ran.stderr_tail));
        // The same flags with tame values give a script of as many lines: nothing hostile broke one.
        const auto tame_flags = run_plain(plain);
        if (tame_flags.exit_code == 0 && line_count(out.stdout_text) != line_count(tame_flags.stdout_text))
            f.reject(sweep,
                     fmt::format("tune {}: {} lines where tame values give {}:\n{}", fmt::join(args, " "),
                                 line_count(out.stdout_text), line_count(tame_flags.stdout_text), out.stdout_text));
        fs::remove(sentinel);
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    WARN(fmt::format("{} runs in {:.1f} s, {} scripts checked", f.runs, took, scripts));
    CHECK(scripts >= 20);
}

namespace {

enum class EmitFormat { json, yaml, toml, shell };

// The format each emit target writes; a target this does not know fails the test, so a new one is never
// checked against the wrong parser.
EmitFormat format_of(std::string_view target) {
    if (target == "deepspeed" || target == "hf-trainer") return EmitFormat::json;
    if (target == "torchtitan") return EmitFormat::toml;
    if (target == "torchrun" || target == "megatron") return EmitFormat::shell;
    if (target == "accelerate-fsdp" || target == "accelerate-fsdp1" || target == "litgpt") return EmitFormat::yaml;
    FAIL("no emit format known for " << target);
    return EmitFormat::json;
}

// Whether `text`, emitted for `target`, parses as that target's format: JSON here, YAML and TOML by
// Python's parsers, a command line (torchrun, Megatron-LM) by bash, one command after its comments.
bool parses_as(const std::string& target, const std::string& text, const fs::path& scratch) {
    const EmitFormat format = format_of(target);
    if (format == EmitFormat::json) return nlohmann::json::parse(text, nullptr, false).is_object();
    spit(scratch, text);
    if (format == EmitFormat::shell) {
        // Lines ending in a backslash continue one command (Megatron-LM's arguments, one a line).
        std::size_t commands = 0;
        bool continued = false;
        for (std::size_t at = 0; at < text.size();) {
            const std::size_t end = std::min(text.find('\n', at), text.size());
            if (end > at && !continued && text[at] != '#') ++commands;
            continued = end > at && text[end - 1] == '\\';
            at = end + 1;
        }
        return commands == 1 && run_plain({"bash", "-n", scratch.string()}).exit_code == 0;
    }
    const char* load = format == EmitFormat::toml ? "import sys, tomllib; tomllib.loads(open(sys.argv[1]).read())"
                                                  : "import sys, yaml; yaml.safe_load(open(sys.argv[1]))";
    return run_plain({"python3", "-c", load, scratch.string()}).exit_code == 0;
}

}  // namespace

TEST_CASE("fuzz: hostile rows of a results database through every emit target", "[fuzz]") {
    Fuzzer f("emit");
    const fs::path base = measured_database(f), sentinel = f.dir / "injected";
    // Every target exports/framework.h lists, so a new one is fuzzed the day it exists.
    const std::vector<std::string> targets(tune::kFrameworkNames.begin(), tune::kFrameworkNames.end());
    const std::vector<std::string> columns{"reason", "peak_bytes",     "tokens_per_s",
                                           "mfu",    "est_peak_bytes", "est_fits",
                                           "status", "micro_batch",    "rank_peaks_json"};
    Mutator m(90210);
    int emitted = 0;  // written and parsed: the fuzz reaches past the refusals
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 36; ++i) {
        const fs::path db = f.dir / fmt::format("e{}.db", i);
        fs::copy_file(base, db, fs::copy_options::overwrite_existing);
        for (std::size_t edit = 0, edits = 1 + m.below(2); edit < edits; ++edit) {
            switch (m.below(4)) {
                case 0:
                    write_row(db, "UPDATE sweeps SET name = ?1", {m.hostile_text(sentinel)});
                    break;
                case 1:
                    write_row(db, "UPDATE trials SET config_json = json_set(config_json, '$.model.name', ?1)",
                              {m.hostile_text(sentinel)});
                    break;
                case 2:
                    write_row(db, "UPDATE trials SET est_frameworks_json = ?1", {m.hostile_value(sentinel)});
                    break;
                default:
                    write_row(db, fmt::format("UPDATE trials SET {} = ?1", columns[m.below(columns.size())]),
                              {m.hostile_value(sentinel)});
            }
        }
        for (int pick = 0; pick < 2; ++pick) {
            const std::string& target = targets[m.below(targets.size())];
            const auto out = f.run({"best", "--db", db.string(), "--emit", target}, db);
            if (out.exit_code != 0) continue;
            ++emitted;
            if (has_control(out.stdout_text) || !parses_as(target, out.stdout_text, f.dir / "emitted"))
                f.reject(
                    db, fmt::format("--emit {} wrote what does not parse as its format:\n{}", target, out.stdout_text));
        }
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    WARN(fmt::format("{} runs in {:.1f} s, {} emitted files parsed", f.runs, took, emitted));
    CHECK(emitted >= 20);
}

TEST_CASE("fuzz: mutated PEFT adapter files through tune trial --init-adapter", "[fuzz]") {
    Fuzzer f("adapter");
    const fs::path fixture = kSource / "tests/fixtures/torch/llama_tiny_lora";
    const std::string config = slurp(fixture / "adapter_config.json");
    const std::string weights = slurp(fixture / "adapter_model.safetensors");
    const nlohmann::json parsed = nlohmann::json::parse(config);
    Mutator m(31337);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 40; ++i) {
        const fs::path adapter = f.dir / fmt::format("a{}", i);
        fs::create_directories(adapter);
        const bool weights_too = i % 4 == 3;
        spit(adapter / "adapter_config.json",
             weights_too ? config : (i % 2 == 0 ? m.mutate(config) : m.mutate_json(parsed).dump(2)));
        spit(adapter / "adapter_model.safetensors", weights_too ? mutated_safetensors(m, weights, i) : weights);
        f.run({"trial", "--init", kTiny.string(), "--init-adapter", adapter.string(), "--steps", "1", "--warmup", "0",
               "--context", "16", "--threads", "1"},
              adapter, true);
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    WARN(fmt::format("{} runs in {:.1f} s", f.runs, took));
}

TEST_CASE("fuzz: hostile probe-cache and lease rows through tune sweep and tune status", "[fuzz]") {
    Fuzzer f("rows");
    const fs::path base = measured_database(f), sentinel = f.dir / "injected";
    const std::vector<std::string> probe_columns{"value", "unit", "seconds",  "measured_at",
                                                 "probe", "host", "software", "device"};
    const auto now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    const std::string host = tune::host_name();
    Mutator m(8086);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 16; ++i) {
        const fs::path db = f.dir / fmt::format("r{}.db", i);
        fs::copy_file(base, db, fs::copy_options::overwrite_existing);
        for (std::size_t edit = 0, edits = 1 + m.below(4); edit < edits; ++edit)
            write_row(
                db,
                fmt::format("UPDATE probes SET {} = ?1 WHERE probe = (SELECT probe FROM probes LIMIT 1 OFFSET ?2)",
                            probe_columns[m.below(probe_columns.size())]),
                {m.hostile_value(sentinel), m.below(24)});
        if (i % 2 == 1) {
            const std::vector<nlohmann::json> hosts{host, m.hostile_text(sentinel), nullptr};
            const std::vector<nlohmann::json> beats{now_ms, now_ms + 3'600'000, m.hostile_value(sentinel)};
            write_row(db, "INSERT OR REPLACE INTO sweep_leases VALUES ('fz', ?1, ?2, ?3)",
                      {hosts[m.below(hosts.size())], m.hostile_value(sentinel), beats[m.below(beats.size())]});
        }
        f.run({"status", "--db", db.string()}, db);
        f.run({"sweep", "--restart", "--no-report", "--db", db.string(), (f.dir / "fz.toml").string()}, db, false,
              {{"TUNE_TRIAL_PROGRAM", kFakeTrial.string()}});
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    WARN(fmt::format("{} runs in {:.1f} s", f.runs, took));
}

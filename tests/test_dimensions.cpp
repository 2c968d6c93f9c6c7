// The dimension table is the one place a search dimension is named: these
// tests hold every reader of it (sweep file, JSON, store columns, flags,
// tables) to the table, row by row, so a new row is covered without a new test.
#include <catch2/catch.hpp>

#include <cctype>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/trial_command.h"
#include "core/config.h"
#include "core/dimensions.h"
#include "core/presets.h"
#include "support/run_command.h"
#include "sweep/space.h"
#include "sweep/spec.h"
#include "test_store_support.h"

using namespace tune;

namespace {

// A value of `d` other than its default (the largest choice, or min + 1 within bounds).
DimValue other_value(const Dimension& d, const TrialConfig& c) {
    const DimValue now = d.get(c);
    if (d.is_enum()) return now == 0 ? static_cast<DimValue>(d.choices.size() - 1) : 0;
    return now == d.min ? d.min + 1 : d.min;
}

}  // namespace

TEST_CASE("the dimension table's rows are distinct and their values round-trip", "[dimensions]") {
    std::set<std::string_view> names, flags, headers;
    std::set<int> ranks;
    for (const Dimension& d : dimensions()) {
        INFO(d.name);
        CHECK(names.insert(d.name).second);
        CHECK(flags.insert(d.flag).second);
        CHECK(headers.insert(d.header).second);
        CHECK(ranks.insert(d.grid_rank).second);
        CHECK(d.flag.starts_with("--"));
        CHECK_FALSE(d.help.empty());
        if (d.is_enum()) {
            REQUIRE_FALSE(d.choices.empty());
            for (DimValue v = 0; v < d.choices.size(); ++v) CHECK(d.parse(d.format(v)) == v);
            CHECK_FALSE(d.parse("no-such-value"));
        } else {
            CHECK(d.parse(d.format(d.min)) == d.min);
            CHECK(d.parse(d.format(d.max)) == d.max);
            CHECK_FALSE(d.parse(std::to_string(std::uint64_t{d.max} + 1)));
            CHECK_FALSE(d.parse("-1"));
            CHECK_FALSE(d.parse("3x"));
        }
        CHECK(find_dimension(d.name) == &d);
    }
    CHECK(ranks.size() == kDimensionCount);
}

namespace {

// Whether `word` stands alone in `text`: not part of a longer name such as
// bf16-mixed or optimizer+params.
bool names_alone(std::string_view text, std::string_view word) {
    const auto joins = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '+'; };
    for (std::size_t at = text.find(word); at != std::string_view::npos; at = text.find(word, at + 1)) {
        const bool open = at == 0 || !joins(text[at - 1]);
        const bool close = at + word.size() == text.size() || !joins(text[at + word.size()]);
        if (open && close) return true;
    }
    return false;
}

}  // namespace

// --help teaches from the row's help text: it names every value the flag takes.
TEST_CASE("each enumeration's help names every one of its choices", "[dimensions][cli]") {
    CHECK(names_alone("fp32, bf16-mixed or bf16 (all)", "bf16"));
    CHECK_FALSE(names_alone("fp32 or bf16-mixed", "bf16"));
    for (const Dimension& d : dimensions()) {
        if (!d.is_enum()) continue;
        for (std::string_view choice : d.choices) {
            INFO(d.name << ": " << choice << " in \"" << d.help << "\"");
            CHECK(names_alone(d.help, choice));
        }
    }
}

TEST_CASE("TrialConfig's JSON carries every dimension, and each one round-trips", "[dimensions]") {
    for (const Dimension& d : dimensions()) {
        INFO(d.name);
        TrialConfig c;
        c.model = *find_model("tiny");
        d.set(c, other_value(d, c));
        const nlohmann::json j = c;
        CHECK(j.contains(d.name) == !(d.legacy && d.get(c) == *d.legacy));  // a legacy value is an absent key
        CHECK(j.get<TrialConfig>() == c);
        CHECK(config_hash(j.get<TrialConfig>()) == config_hash(c));
    }
}

TEST_CASE("a configuration stored before a row existed reads back with the value it ran with", "[dimensions]") {
    TrialConfig current;
    current.model = *find_model("tiny");
    nlohmann::json old = current;
    for (const Dimension& d : dimensions())
        if (d.legacy) old.erase(std::string(d.name));  // as written before those rows existed
    const auto back = old.get<TrialConfig>();
    CHECK(back.attention == Attention::eager);  // trials before flash attention ran eager
    CHECK(back.method == Method::full);
    // Flash, the default now, is a different configuration from those old eager ones: its own key and hash.
    CHECK(nlohmann::json(current).at("attention") == "flash");
    CHECK(config_hash(current) != config_hash(back));
    TrialConfig eager = current;
    eager.attention = Attention::eager;
    CHECK(config_hash(eager) == config_hash(back));
    CHECK_FALSE(nlohmann::json(eager).contains("attention"));
}

TEST_CASE("a sweep file's [space] takes each dimension by its table name, an omitted one holds its fallback",
          "[dimensions]") {
    const ModelSpec tiny = *find_model("tiny");
    for (const Dimension& d : dimensions()) {
        INFO(d.name);
        TrialConfig probe;
        const DimValue v = other_value(d, probe);
        const std::string value = d.is_enum() ? "\"" + d.format(v) + "\"" : d.format(v);
        const std::string text = "name = \"t\"\n[model]\npreset = \"tiny\"\n[hardware]\ndevice = \"cpu\"\n[space]\n" +
                                 std::string(d.name) + " = [" + value + "]\n";
        const SweepSpec spec = parse_sweep(text, "t.toml");
        CHECK(spec.space.of(d.name) == std::vector<DimValue>{v});
        for (const Dimension& other : dimensions())
            if (other.name != d.name) CHECK(spec.space.of(other.name) == std::vector<DimValue>{other.fallback(tiny)});
        const auto candidates = expand_space(spec);
        REQUIRE(candidates.size() == 1);
        // A value that means nothing beside the fallbacks (a LoRA rank with method full) is held at the default.
        CHECK(d.get(candidates[0].config) == (d.applies_to(candidates[0].config) ? v : d.get(TrialConfig{})));
    }
}

TEST_CASE("the space expands in grid order: the lowest grid_rank outermost", "[dimensions]") {
    const std::string text =
        "name = \"t\"\n[model]\npreset = \"tiny\"\n[hardware]\ndevice = \"cpu\"\n[space]\n"
        "optimizer = [\"adamw\", \"lion\"]\nprecision = [\"fp32\", \"bf16\"]\nzero_stage = [0, 1]\n"
        "grad_accum = [1, 2]\nmicro_batch = [1, 2]\ncontext = [32, 64]\ncheckpointing = [\"none\", \"full\"]\n";
    const SweepSpec spec = parse_sweep(text, "t.toml");
    const auto candidates = expand_space(spec);
    REQUIRE(candidates.size() == spec.space.size());
    REQUIRE(candidates.size() >= 128);
    // Walking the grid, a dimension changes once per product of the sizes of those nested inside it.
    std::size_t period = 1;
    for (std::size_t rank = kDimensionCount; rank-- > 0;) {
        const std::size_t index = grid_order()[rank];
        const Dimension& d = dimensions()[index];
        INFO(d.name);
        const std::size_t size = spec.space.values[index].size();
        for (std::size_t k = 1; k < candidates.size(); ++k) {
            const bool changed = d.get(candidates[k].config) != d.get(candidates[k - 1].config);
            CHECK(changed == (size > 1 && k % period == 0));
        }
        period *= size;
    }
}

TEST_CASE("the store has a column per dimension holding its value, and re-adds a missing one", "[dimensions][store]") {
    test::ScratchDir dir;
    const std::string db = dir.file("t.db");
    TrialConfig c = test::sample_config(3);
    for (const Dimension& d : dimensions()) d.set(c, other_value(d, c));
    {
        Store store(db, Store::Mode::read_write);
        const SweepId sweep = store.open_sweep(test::sample_sweep("s"), false).id;
        const std::vector<NewTrial> trials{{c, TrialStatus::pending, "", std::nullopt, 0, {}}};
        REQUIRE(store.add_trials(sweep, trials) == 1);
    }
    for (const Dimension& d : dimensions()) {
        INFO(d.name);
        const auto r = test::run_command("sqlite3 " + db + " 'SELECT " + std::string(d.name) + " FROM trials'");
        CHECK(r.exit_code == 0);
        CHECK(r.output == d.text(c) + "\n");
    }
    // A database from before a dimension existed: its column comes back with the default.
    const Dimension& last = dimensions().back();
    REQUIRE(test::run_command("sqlite3 " + db + " 'ALTER TABLE trials DROP COLUMN " + std::string(last.name) + "'")
                .exit_code == 0);
    { Store reopened(db, Store::Mode::read_write); }
    const auto r = test::run_command("sqlite3 " + db + " 'SELECT " + std::string(last.name) + " FROM trials'");
    CHECK(r.output == last.text(TrialConfig{}) + "\n");
}

TEST_CASE("every command that takes a configuration has every dimension's flag", "[dimensions][cli]") {
    for (const char* command : {"trial", "estimate", "best"}) {
        const auto help = test::run_tune(std::string(command) + " --help");
        for (const Dimension& d : dimensions()) {
            INFO(command << " " << d.flag);
            CHECK_THAT(help.output, Catch::Contains(std::string(d.flag)));
        }
    }
    TrialConfig c;
    c.model = *find_model("tiny");
    c.method = Method::lora;         // so that every row means something
    c.attention = Attention::eager;  // and differs from the default, which the line leaves out
    c.offload = Offload::optimizer;
    c.tensor_parallel = 2, c.sequence_parallel = true, c.world_size = 4;
    c.pipeline_parallel = 2, c.pipeline_schedule = PipelineSchedule::interleaved, c.virtual_stages = 2;
    c.pipeline_split = PipelineSplit::embedding;
    const std::string line = trial_command(c);
    for (const Dimension& d : dimensions()) CHECK_THAT(line, Catch::Contains(std::string(d.flag) + " " + d.text(c)));
    const auto bad = test::run_tune("estimate --optimizer adamx");
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.output, Catch::Contains("--optimizer 'adamx': expected adamw, lion") &&
                               Catch::Contains("did you mean 'adamw'?"));
    const auto range = test::run_tune("estimate --zero 4");
    CHECK(range.exit_code == 2);
    CHECK_THAT(range.output, Catch::Contains("--zero '4': expected 0 to 3"));
}

TEST_CASE("summary and table cells follow the table's order", "[dimensions]") {
    TrialConfig c;
    c.optimizer = Optimizer::lion;
    c.precision = Precision::bf16_mixed;
    c.zero_stage = 3;
    c.grad_accum = 4;
    c.context = 4096;
    c.checkpointing = Checkpointing::full;
    c.world_size = 8;
    c.attention = Attention::eager;
    CHECK(summary(c) == "lion bf16-mixed z3 ga4 mb1 ctx4096 ckpt=full eager x8");
    const auto cells = dimension_cells(c);
    CHECK(std::vector<std::string>(cells.begin(), cells.end()) ==
          std::vector<std::string>{"lion", "bf16-mixed", "3", "4", "1", "4096", "full", "eager", "full", "-", "-",
                                   "none", "1", "-", "1", "-", "-", "-"});
    // The method rows: full and its meaningless rank stay out of the summary; lora shows both.
    c.method = Method::lora;
    c.lora_rank = 8;
    CHECK(summary(c) == "lion bf16-mixed z3 ga4 mb1 ctx4096 ckpt=full eager lora r8 all-linear x8");
    const auto cell = [&](std::string_view name) {
        return dimension_cells(c)[static_cast<std::size_t>(find_dimension(name) - dimensions().data())];
    };
    CHECK(cell("lora_rank") == "8");
    CHECK(cell("lora_targets") == "all-linear");
    // Offload, the last row, shows in the summary once it is not none.
    c.offload = Offload::optimizer;
    CHECK(summary(c) == "lion bf16-mixed z3 ga4 mb1 ctx4096 ckpt=full eager lora r8 all-linear offload=optimizer x8");
    CHECK(cell("offload") == "optimizer");
    // Tensor parallelism shows once above 1, and sequence parallelism only beside it.
    c.tensor_parallel = 2;
    c.sequence_parallel = true;
    CHECK(summary(c) ==
          "lion bf16-mixed z3 ga4 mb1 ctx4096 ckpt=full eager lora r8 all-linear offload=optimizer tp2 sp=on x8");
    CHECK(cell("tensor_parallel") == "2");
    CHECK(cell("sequence_parallel") == "on");
    c.tensor_parallel = 1;
    CHECK(cell("sequence_parallel") == "-");
}

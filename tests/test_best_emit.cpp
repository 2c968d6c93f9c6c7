// `tune best --emit F` answers with what F writes exactly (exports/expressible.h): for every target
// exports/framework.h lists, over a wide space of configurations and of queries, the configuration
// it exports is one F neither refuses nor says it cannot express; what it ranked out is counted on
// stderr with the best one's reason (issue 70, fault 1).
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/dimensions.h"
#include "exports/expressible.h"
#include "exports/framework.h"
#include "store/best.h"
#include "store/store.h"
#include "tests/support/run_command.h"
#include "tests/test_store_support.h"

using namespace tune;

namespace {

// An estimate-only sweep of `model` on 8 H100s over every optimizer, precision, stage,
// checkpointing, attention, method, offload and two micro-batches, clipping at `clip` (LitGPT cannot
// clip, torchtitan cannot leave it out: one sweep of each lets every target answer somewhere).
std::string wide_db(const test::ScratchDir& dir, const std::string& model, double clip) {
    const std::string name = fmt::format("{}-clip{}", model, clip);
    std::ofstream(dir.file(name + ".toml"))
        << "name = \"" << name << "\"\n[model]\npreset = \"" << model << "\"\n[hardware]\ngpus = 8\n"
        << "device = \"h100-80gb\"\n[space]\n"
        << "optimizer = [\"adamw\", \"lion\", \"adam8bit\", \"adafactor\", \"lomo\"]\n"
        << "precision = [\"fp32\", \"bf16-mixed\", \"fp16-mixed\", \"bf16\"]\n"
        << "zero_stage = [0, 1, 2, 3]\ncheckpointing = [\"none\", \"selective\", \"full\"]\n"
        << "attention = [\"flash\", \"eager\"]\nmethod = [\"full\", \"lora\"]\noffload = [\"none\", \"optimizer\"]\n"
        << "micro_batch = [1, 4]\ncontext = [2048]\n[trial]\nclip = " << clip << "\n";
    const std::string db = dir.file(name + ".db");
    const auto out = test::run_tune("sweep --dry-run --no-report --db " + db + " " + dir.file(name + ".toml"));
    INFO(out.output);
    REQUIRE(out.exit_code == 0);
    return db;
}

// The queries a user asks of a sweep: none, and one per value of the dimensions that decide what a
// target can express, a memory limit, and the order by memory.
std::vector<BestQuery> wide_queries() {
    std::vector<BestQuery> out(1);
    for (const char* name : {"optimizer", "precision", "zero_stage", "checkpointing", "method", "offload"}) {
        const Dimension* d = find_dimension(name);
        const auto index = static_cast<std::size_t>(d - dimensions().data());
        const DimValue last = d->is_enum() ? static_cast<DimValue>(d->choices.size() - 1) : d->max;
        for (DimValue v = d->is_enum() ? 0 : d->min; v <= last; ++v) out.emplace_back().equal.emplace_back(index, v);
    }
    out.emplace_back().max_memory = 24ull << 30;
    out.emplace_back().by = BestBy::peak_memory;
    return out;
}

// `tune best --emit F`'s query: F's stack, and F's rule of what it writes exactly.
BestQuery for_target(BestQuery q, Framework f) {
    q.framework = std::string(to_string(profile_of(f)));
    q.emit = EmitTarget{std::string(to_string(f)), [f](const TrialConfig& c) { return inexpressible(f, c); }};
    return q;
}

// Why `f`'s export of `c` is not what tune ranked, or "" when it is exactly that.
std::string not_exact(Framework f, const TrialConfig& c) {
    try {
        const FrameworkExport e = export_config(f, c);
        return e.cannot_express.empty() ? "" : e.cannot_express.front();
    } catch (const ExportRefused& refused) {
        return refused.what();
    }
}

}  // namespace

TEST_CASE("best --emit F answers, for every target, only with what F writes exactly, over a wide space",
          "[exports][best]") {
    test::ScratchDir dir;
    const std::vector<std::string> dbs{wide_db(dir, "llama-7b", 0.0), wide_db(dir, "llama3-8b", 1.0)};
    std::vector<std::vector<TrialRecord>> trials;
    for (const std::string& db : dbs) trials.push_back(Store::open_reader(db).trials({{}, TrialStatus::pending}));
    const std::vector<BestQuery> queries = wide_queries();
    for (std::string_view name : kFrameworkNames) {
        const Framework f = *parse_framework(name);
        DYNAMIC_SECTION("--emit " << name) {
            std::size_t answered = 0, ranked_out = 0;
            for (const auto& records : trials)
                for (const BestQuery& q : queries) {
                    const BestAnswer a = rank_predicted(records, for_target(q, f));
                    ranked_out += a.inexpressible;
                    if (a.ranked.empty()) continue;
                    ++answered;
                    for (const TrialRecord& t : a.ranked) {
                        INFO("trial " << t.id << ": " << summary(t.result.config));
                        CHECK(not_exact(f, t.result.config).empty());
                    }
                }
            // Every target answers somewhere in the space, and ranks out something it cannot express.
            CHECK(answered > 0);
            CHECK(ranked_out > 0);
        }
    }
}

TEST_CASE("tune best --emit F exports what F expresses and says on stderr what it left out, for every target",
          "[exports][best][cli]") {
    test::ScratchDir dir;
    const std::vector<std::string> dbs{wide_db(dir, "llama-7b", 0.0), wide_db(dir, "llama3-8b", 1.0)};
    const std::regex chosen("# the best (measured|predicted) configuration: trial ([0-9]+) of sweep");
    for (std::string_view name : kFrameworkNames) {
        const Framework f = *parse_framework(name);
        std::size_t exported = 0;
        for (const std::string& db : dbs) {
            const auto out = test::run_tune(fmt::format("best --emit {} --db {}", name, db));
            INFO("--emit " << name << " on " << db << ":\n" << out.output.substr(0, 3000));
            std::smatch m;
            if (out.exit_code == 1) {
                // Nothing F writes exactly: the answer says why, naming what it left out.
                CHECK_THAT(out.output, Catch::Contains("cannot write exactly any of the"));
                continue;
            }
            REQUIRE(out.exit_code == 0);
            REQUIRE(std::regex_search(out.output, m, chosen));
            ++exported;
            const auto t = Store::open_reader(db).trial(std::stoll(m[2]));
            REQUIRE(t);
            CHECK(not_exact(f, t->result.config).empty());
            // The wide space holds configurations every target cannot express: they are counted, with a reason.
            CHECK_THAT(out.output, Catch::Contains("# left out of the predicted answer: ") &&
                                       Catch::Contains(fmt::format("configurations {} cannot express exactly; the "
                                                                   "best: trial ",
                                                                   name)));
        }
        INFO("--emit " << name);
        CHECK(exported > 0);
    }
}

TEST_CASE(
    "best --emit deepspeed ranks Adafactor under ZeRO-3 out of a Llama-7B sweep, and answers none when only it "
    "qualifies",
    "[exports][best][cli]") {
    test::ScratchDir dir;
    std::ofstream(dir.file("s.toml")) << "name = \"a\"\n[model]\npreset = \"llama-7b\"\n[hardware]\ngpus = 8\n"
                                      << "device = \"h100-80gb\"\n[space]\noptimizer = [\"adafactor\", \"adamw\"]\n"
                                      << "precision = [\"bf16-mixed\"]\nzero_stage = [3]\ncontext = [2048]\n";
    const std::string db = dir.file("r.db");
    REQUIRE(test::run_tune("sweep --dry-run --no-report --db " + db + " " + dir.file("s.toml")).exit_code == 0);
    const auto out = test::run_tune("best --emit deepspeed --db " + db);
    INFO(out.output);
    CHECK(out.exit_code == 0);
    CHECK_THAT(out.output, !Catch::Contains("# cannot express") && Catch::Contains("\"type\": \"AdamW\"") &&
                               Catch::Contains("configurations deepspeed cannot express exactly; the best: trial ") &&
                               Catch::Contains("Adafactor under ZeRO"));
    // Adafactor alone: nothing DeepSpeed writes exactly, so no answer, and the reason.
    const auto none = test::run_tune("best --emit deepspeed --optimizer adafactor --db " + db);
    INFO(none.output);
    CHECK(none.exit_code == 1);
    CHECK_THAT(none.output,
               Catch::Contains("--emit deepspeed cannot write exactly any of the") && Catch::Contains("Adafactor"));
}

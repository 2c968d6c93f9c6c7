// The parallel plan: a rank's coordinates, the groups its collectives run over, and
// why a combination of sizes cannot be built.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "core/parallel_plan.h"
#include "core/presets.h"

using namespace tune;

namespace {

const std::initializer_list<MeshAxis> kTp{MeshAxis::tp}, kCp{MeshAxis::cp}, kDp{MeshAxis::dp}, kPp{MeshAxis::pp};

// Every rank in exactly one group, each group `size` ranks, and each rank's group its own.
void check_partition(const ParallelPlan& p, std::initializer_list<MeshAxis> axes, std::uint32_t size) {
    const auto groups = p.groups(axes);
    std::multiset<std::uint32_t> seen;
    for (const auto& g : groups) {
        CHECK(g.size() == size);
        CHECK(std::is_sorted(g.begin(), g.end()));
        seen.insert(g.begin(), g.end());
        for (std::uint32_t r : g) CHECK(p.group(axes, r) == g);
    }
    CHECK(seen.size() == p.world());
    for (std::uint32_t r = 0; r < p.world(); ++r) CHECK(seen.count(r) == 1);
}

ModelSpec model_with(std::uint64_t heads, std::uint64_t kv_heads, std::uint64_t layers) {
    ModelSpec m = *find_model("tiny");
    m.heads = heads, m.kv_heads = kv_heads, m.layers = layers;
    m.hidden = heads * 16;
    m.ffn = 64 * 8;
    return m;
}

}  // namespace

TEST_CASE("every plan up to 64 ranks numbers its ranks tp innermost and partitions them into its groups") {
    const std::uint32_t sizes[] = {1, 2, 4, 8};
    int plans = 0;
    for (std::uint32_t dp : sizes)
        for (std::uint32_t tp : sizes)
            for (std::uint32_t pp : sizes)
                for (std::uint32_t cp : sizes) {
                    const ParallelPlan p = ParallelPlan::of(dp, tp, pp, cp);
                    if (p.world() > 64) continue;
                    ++plans;
                    INFO("dp " << dp << " tp " << tp << " pp " << pp << " cp " << cp);
                    for (std::uint32_t r = 0; r < p.world(); ++r) {
                        const MeshCoordinates at = p.coordinates(r);
                        CHECK(p.rank_of(at) == r);
                        CHECK(r == at[MeshAxis::tp] +
                                       tp * (at[MeshAxis::cp] + cp * (at[MeshAxis::dp] + dp * at[MeshAxis::pp])));
                    }
                    check_partition(p, kTp, tp);
                    check_partition(p, kCp, cp);
                    check_partition(p, kDp, dp);
                    check_partition(p, kPp, pp);
                    check_partition(p, {MeshAxis::dp, MeshAxis::cp}, dp * cp);
                    check_partition(p, {MeshAxis::tp, MeshAxis::cp, MeshAxis::dp}, tp * cp * dp);
                    // A tensor group is consecutive ranks; a stage's ranks are one contiguous block.
                    for (const auto& g : p.groups(kTp)) CHECK(g.back() - g.front() == tp - 1);
                    for (std::uint32_t r = 0; r < p.world(); ++r)
                        CHECK(p.coordinates(r)[MeshAxis::pp] == r / (p.world() / pp));
                }
    CHECK(plans == 150);  // the (dp, tp, pp, cp) in {1, 2, 4, 8}^4 whose product is at most 64
}

TEST_CASE("a plan's Comm::split colour and key rebuild its groups") {
    const ParallelPlan p = ParallelPlan::of(2, 4, 2, 1);
    for (std::uint32_t r = 0; r < p.world(); ++r)
        for (auto axes : {kTp, kDp, kPp}) {
            const GroupSplit s = p.split(axes, r);
            const auto g = p.group(axes, r);
            CHECK(s.color == static_cast<int>(g.front()));
            CHECK(g[static_cast<std::size_t>(s.key)] == r);
        }
    // dp x tp as the trainer splits it today: consecutive tensor ranks, data ranks tp apart.
    const ParallelPlan grid = ParallelPlan::of(2, 2);
    CHECK(grid.group(kTp, 1) == std::vector<std::uint32_t>{0, 1});
    CHECK(grid.group(kDp, 1) == std::vector<std::uint32_t>{1, 3});
}

TEST_CASE("expert groups split each dp x cp group into ep blocks and their replicas") {
    for (std::uint32_t ep : {1u, 2u, 4u, 8u}) {
        const ParallelPlan p = ParallelPlan::of(4, 2, 1, 2, ep);
        INFO("ep " << ep);
        CHECK(p.expert_data_parallel() == 8 / ep);
        for (std::uint32_t r = 0; r < p.world(); ++r) {
            const auto experts = p.expert_group(r), replicas = p.expert_data_group(r);
            CHECK(experts.size() == ep);
            CHECK(replicas.size() == 8 / ep);
            // One rank in common (itself), and together they span its dp x cp group.
            std::vector<std::uint32_t> both;
            std::set_intersection(experts.begin(), experts.end(), replicas.begin(), replicas.end(),
                                  std::back_inserter(both));
            CHECK(both == std::vector<std::uint32_t>{r});
            for (std::uint32_t e : experts) CHECK(p.coordinates(e)[MeshAxis::tp] == p.coordinates(r)[MeshAxis::tp]);
        }
    }
}

TEST_CASE("a plan that cannot be built names why") {
    const ModelSpec m = model_with(8, 2, 12);
    auto reason = [&](const ParallelPlan& p, std::uint32_t context = 128,
                      std::optional<std::uint32_t> node = std::nullopt) {
        const auto bad = parallel_plan_problem(p, m, context, node);
        return bad ? std::string(bad->kind) + ": " + bad->reason : std::string("ok");
    };
    CHECK(reason(ParallelPlan::of(2, 2, 2, 2)) == "ok");
    CHECK_THAT(reason(ParallelPlan::of(0, 1)), Catch::StartsWith("counts: data_parallel must be positive"));
    CHECK_THAT(reason(ParallelPlan::of(1, 1, 0)), Catch::StartsWith("counts: pipeline_parallel"));
    ParallelPlan uneven = ParallelPlan::of(2, 2);
    uneven.ranks = 6;
    CHECK_THAT(reason(uneven), Catch::Contains("the 6 ranks are not data x tensor x pipeline x context"));
    CHECK_THAT(reason(ParallelPlan::of(1, 16)), Catch::Contains("does not divide the model's 8 attention heads"));
    CHECK(reason(ParallelPlan::of(1, 4)) == "ok");  // 4 ranks over 2 KV heads: each replicated twice
    const ModelSpec odd_kv = model_with(12, 3, 12);
    const auto kv = parallel_plan_problem(ParallelPlan::of(1, 4), odd_kv, 128);
    REQUIRE(kv);
    CHECK_THAT(kv->reason, Catch::Contains("4 neither divides the model's 3 KV heads"));
    CHECK_THAT(reason(ParallelPlan::of(1, 1, 8)), Catch::Contains("12 layers do not divide into 8 pipeline stages"));
    CHECK_THAT(reason(ParallelPlan::of(1, 1, 1, 8), 100),
               Catch::Contains("context_parallel 8 does not divide the context 100"));
    CHECK_THAT(reason(ParallelPlan::of(3, 1, 1, 1, 2)), Catch::Contains("expert_parallel 2 does not divide the 3"));
    CHECK_THAT(reason(ParallelPlan::of(2, 1, 1, 1, 2)), Catch::Contains("needs a mixture-of-experts model"));
    CHECK_THAT(reason(ParallelPlan::of(1, 4), 128, 2), Catch::Contains("does not fit within a node of 2 ranks"));
    CHECK(reason(ParallelPlan::of(2, 4), 128, 8) == "ok");
    ParallelPlan sp = ParallelPlan::of(1, 2, 1, 2);
    sp.sequence_parallel = true;
    CHECK_THAT(reason(sp, 130), Catch::Contains("context 130 is not a multiple of 4"));
}

TEST_CASE("a configuration's plan: tp from tensor_parallel, dp the rest of its ranks") {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.world_size = 8, c.tensor_parallel = 2;
    const ParallelPlan p = parallel_plan(c);
    CHECK(p.dp == 4);
    CHECK(p.tp == 2);
    CHECK(p.pp == 1);
    CHECK(p.cp == 1);
    CHECK(p.ep == 1);
    CHECK(p.world() == 8);
    CHECK(p.zero_shards() == 4);
    CHECK_FALSE(parallel_problem(c));
    // A world that does not divide still starts its ranks, and validity says why it cannot be built.
    c.world_size = 3;
    CHECK(parallel_plan(c).world() == 3);
    const auto bad = parallel_problem(c);
    REQUIRE(bad);
    CHECK(bad->kind == "tensor-parallel");
    CHECK_THAT(bad->reason, Catch::Contains("does not divide the world size 3"));
}

TEST_CASE("no source file outside core/ and store/ reads a configuration's world_size: it asks the plan") {
    namespace fs = std::filesystem;
    const fs::path root = TUNE_SOURCE_DIR;
    // An identifier world_size that is neither a call (Comm::world_size()) nor assigned; strings and comments aside.
    const std::regex read(R"(\bworld_size\b(?!\s*\()(?!\s*=[^=]))");
    const std::regex literal(R"("(\\.|[^"\\])*")");
    std::vector<std::string> reads;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        const fs::path rel = fs::relative(entry.path(), root);
        const std::string top = rel.begin()->string();
        if (!entry.is_regular_file() || top == "core" || top == "store" || top == "tests" || top == "build" ||
            top.starts_with("."))
            continue;
        const std::string ext = entry.path().extension().string();
        if (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh") continue;
        std::ifstream in(entry.path());
        int n = 0;
        for (std::string line; std::getline(in, line);) {
            ++n;
            std::string code = std::regex_replace(line.substr(0, line.find("//")), literal, "\"\"");
            if (std::regex_search(code, read)) reads.push_back(rel.string() + ":" + std::to_string(n) + ": " + line);
        }
    }
    for (const auto& r : reads) FAIL_CHECK(r);
}

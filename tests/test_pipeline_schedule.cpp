// The pipeline schedule's table on its own: every step once, each after what it depends on, the activations
// each stage holds, the bubble, and the layer split.
#include <catch2/catch.hpp>

#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "core/pipeline_schedule.h"
#include "core/pipeline_split.h"

using namespace tune;

namespace {

struct Sizes {
    PipelineSchedule schedule;
    std::uint32_t p, v, m;
};

std::vector<Sizes> runnable_sizes() {
    std::vector<Sizes> out;
    for (std::uint32_t p : {1u, 2u, 3u, 4u, 8u})
        for (std::uint32_t m : {1u, 2u, 3u, 4u, 6u, 8u, 12u, 16u, 32u}) {
            if (!pipeline_schedule_problem(PipelineSchedule::one_f_one_b, p, 1, m))
                out.push_back({PipelineSchedule::one_f_one_b, p, 1, m});
            for (std::uint32_t v : {2u, 3u, 4u})
                if (!pipeline_schedule_problem(PipelineSchedule::interleaved, p, v, m))
                    out.push_back({PipelineSchedule::interleaved, p, v, m});
        }
    return out;
}

}  // namespace

TEST_CASE("every stage runs each micro-batch's forward and backward through each of its chunks once, forward first") {
    for (const Sizes& z : runnable_sizes()) {
        INFO("p " << z.p << " v " << z.v << " m " << z.m);
        const PipelineTable t = pipeline_table(z.schedule, z.p, z.v, z.m);
        REQUIRE(t.steps.size() == z.p);
        for (const auto& steps : t.steps) {
            CHECK(steps.size() == 2u * z.m * z.v);
            std::set<std::tuple<std::uint32_t, std::uint32_t, bool>> seen;
            for (const PipelineStep& s : steps) {
                CHECK(s.micro_batch < z.m);
                CHECK(s.chunk < z.v);
                CHECK(seen.insert({s.micro_batch, s.chunk, s.backward}).second);
                if (s.backward) CHECK(seen.count({s.micro_batch, s.chunk, false}) == 1);
            }
        }
        // It runs: time_pipeline throws where a step waits for one that never comes.
        CHECK_NOTHROW(time_pipeline(t, 1.0, 2.0, 0.1));
    }
}

TEST_CASE("1F1B's stage i holds min(m, p - i) micro-batches") {
    for (std::uint32_t p : {1u, 2u, 4u, 8u})
        for (std::uint32_t m : {8u, 9u, 16u}) {
            const auto peaks = peak_in_flight(pipeline_table(PipelineSchedule::one_f_one_b, p, 1, m));
            for (std::uint32_t i = 0; i < p; ++i) CHECK(peaks[i] == std::min(m, p - i));
        }
}

TEST_CASE("interleaving holds (1 + (p - 1) / (p v)) times 1F1B's activations on the first stage") {
    for (std::uint32_t p : {2u, 4u, 8u})
        for (std::uint32_t v : {2u, 3u, 4u}) {
            const std::uint32_t m = 4 * p;
            const auto peaks = peak_in_flight(pipeline_table(PipelineSchedule::interleaved, p, v, m));
            // Chunks of L / (p v) layers: p v + p - 1 of them is L (1 + (p - 1) / (p v)) layers' worth.
            CHECK(peaks[0] == p * v + p - 1);
            for (std::uint32_t i = 1; i < p; ++i) CHECK(peaks[i] <= peaks[i - 1]);
        }
    // As many micro-batches as stages: every forward first (Megatron's all-warm-up case).
    const auto all = peak_in_flight(pipeline_table(PipelineSchedule::interleaved, 4, 2, 4));
    for (std::uint32_t held : all) CHECK(held == 8);
}

TEST_CASE("the timed table's bubble is the closed form (p - 1) / (v m + p - 1) without hops, larger with them") {
    for (const Sizes& z : runnable_sizes()) {
        if (z.m < z.p || z.p == 1) continue;
        INFO("p " << z.p << " v " << z.v << " m " << z.m);
        const PipelineTable t = pipeline_table(z.schedule, z.p, z.v, z.m);
        // Forward and backward of a chunk in the 1 : 2 ratio of their FLOPs.
        const PipelineTiming timed = time_pipeline(t, 1.0 / z.v, 2.0 / z.v);
        CHECK(timed.makespan_s == Approx((z.m * z.v + z.p - 1) * 3.0 / z.v));
        CHECK(timed.bubble_fraction == Approx(pipeline_bubble_closed_form(z.p, z.v, z.m)));
        CHECK(time_pipeline(t, 1.0 / z.v, 2.0 / z.v, 0.05).bubble_fraction > timed.bubble_fraction);
    }
    CHECK(time_pipeline(pipeline_table(PipelineSchedule::one_f_one_b, 1, 1, 4), 1, 2).bubble_fraction == 0.0);
}

TEST_CASE("interleaving shrinks the bubble of the same pipeline") {
    const double one = time_pipeline(pipeline_table(PipelineSchedule::one_f_one_b, 4, 1, 8), 1, 2).bubble_fraction;
    const double two = time_pipeline(pipeline_table(PipelineSchedule::interleaved, 4, 2, 8), 0.5, 1).bubble_fraction;
    CHECK(two < one);
}

TEST_CASE("a schedule refuses sizes it cannot run, saying which key to change") {
    CHECK_THAT(*pipeline_schedule_problem(PipelineSchedule::one_f_one_b, 4, 1, 2), Catch::Contains("grad_accum"));
    CHECK_THAT(*pipeline_schedule_problem(PipelineSchedule::one_f_one_b, 4, 2, 8), Catch::Contains("interleaved"));
    CHECK_THAT(*pipeline_schedule_problem(PipelineSchedule::interleaved, 4, 1, 8), Catch::Contains("virtual_stages"));
    CHECK_THAT(*pipeline_schedule_problem(PipelineSchedule::interleaved, 4, 2, 6), Catch::Contains("multiple"));
    CHECK(pipeline_schedule_problem(PipelineSchedule::one_f_one_b, 0, 1, 1));
    CHECK_THROWS_AS(pipeline_table(PipelineSchedule::one_f_one_b, 4, 1, 3), std::invalid_argument);
    CHECK_FALSE(pipeline_schedule_problem(PipelineSchedule::one_f_one_b, 1, 1, 1));
}

TEST_CASE("layers divide evenly, or count the embedding and the loss as a layer as Megatron does") {
    CHECK(pipeline_layers(32, 4, 1, PipelineSplit::even) == std::vector<std::uint32_t>{8, 8, 8, 8});
    CHECK(pipeline_layers(32, 2, 2, PipelineSplit::even) == std::vector<std::uint32_t>{8, 8, 8, 8});
    CHECK(pipeline_layers(31, 4, 1, PipelineSplit::embedding) == std::vector<std::uint32_t>{7, 8, 8, 8});
    CHECK(pipeline_layers(31, 4, 1, PipelineSplit::loss) == std::vector<std::uint32_t>{8, 8, 8, 7});
    CHECK(pipeline_layers(30, 4, 1, PipelineSplit::embedding_loss) == std::vector<std::uint32_t>{7, 8, 8, 7});
    CHECK(pipeline_first_layer({7, 8, 8, 7}, 2) == 15);
    for (std::uint32_t layers = 1; layers <= 40; ++layers)
        for (PipelineSplit split : kPipelineSplits)
            for (std::uint32_t p : {1u, 2u, 4u})
                for (std::uint32_t v : {1u, 2u}) {
                    if (pipeline_split_problem(layers, p, v, split)) continue;
                    const auto each = pipeline_layers(layers, p, v, split);
                    CHECK(std::accumulate(each.begin(), each.end(), 0u) == layers);
                    for (std::uint32_t n : each) CHECK(n >= 1);
                }
    CHECK_THAT(*pipeline_split_problem(30, 4, 1, PipelineSplit::even), Catch::Contains("30 layers"));
    CHECK_THAT(*pipeline_split_problem(31, 4, 1, PipelineSplit::even), Catch::Contains("pipeline_split"));
    CHECK(pipeline_split_problem(3, 4, 1, PipelineSplit::embedding_loss));  // (3 + 2) / 4 leaves a stage empty
}

TEST_CASE("each pair of stages receives in the order its peer sends, so transfers need no tags") {
    for (const Sizes& z : runnable_sizes()) {
        if (z.p == 1) continue;
        INFO("p " << z.p << " v " << z.v << " m " << z.m);
        const PipelineTable t = pipeline_table(z.schedule, z.p, z.v, z.m);
        const std::uint32_t last = z.p * z.v - 1;
        // (from, to) -> the (micro-batch, virtual stage, backward) of each transfer, in each side's order.
        std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<std::tuple<std::uint32_t, std::uint32_t, bool>>>
            sent, received;
        for (std::uint32_t stage = 0; stage < z.p; ++stage)
            for (const PipelineStep& s : t.steps[stage]) {
                const std::uint32_t g = t.virtual_stage(stage, s.chunk);
                const std::uint32_t next = (stage + 1) % z.p, previous = (stage + z.p - 1) % z.p;
                if (!s.backward && g < last) sent[{stage, next}].push_back({s.micro_batch, g + 1, false});
                if (s.backward && g > 0) sent[{stage, previous}].push_back({s.micro_batch, g - 1, true});
                if (!s.backward && g > 0) received[{previous, stage}].push_back({s.micro_batch, g, false});
                if (s.backward && g < last) received[{next, stage}].push_back({s.micro_batch, g, true});
            }
        CHECK(sent == received);
    }
}

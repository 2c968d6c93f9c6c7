// The measured front `tune sweep` prints at the end of a run marks ties within
// noise as `tune report` and `tune best` do (reports/front_ties).
#include <catch2/catch.hpp>

#include "core/presets.h"
#include "reports/measured_front_text.h"
#include "tests/support/timed_trial.h"

using namespace tune;

namespace {

TrialRecord member(TrialId id, std::uint64_t peak, double tokens_per_s, double median_s, double stddev_s) {
    TrialRecord t = test::timed_trial(id, tokens_per_s, median_s, stddev_s, peak, 5);
    t.result.config.model = *find_model("tiny");
    t.result.config.zero_stage = static_cast<std::uint32_t>(id % 4);
    return t;
}

}  // namespace

TEST_CASE("the sweep's end-of-run front marks ties within noise", "[report][noise]") {
    // Trial 12 is 1% faster than trial 11 with steps 10% noisy: a tie. Trial 13 is twice as fast: none.
    const std::vector<TrialRecord> front{member(11, 1 << 20, 1000, 0.1, 0.01), member(12, 2 << 20, 1010, 0.099, 0.01),
                                         member(13, 3 << 20, 2000, 0.05, 0.001)};
    const std::string text = measured_front_text(front);
    CHECK(text.find("tie") != std::string::npos);
    CHECK(text.find("= trial 11") != std::string::npos);
    CHECK(text.find("= trial 12") == std::string::npos);
    CHECK(text.find("within noise") != std::string::npos);  // the legend

    SECTION("no tie: no column and no legend") {
        const std::vector<TrialRecord> apart{member(11, 1 << 20, 1000, 0.1, 0.001),
                                             member(13, 3 << 20, 2000, 0.05, 0.001)};
        const std::string plain = measured_front_text(apart);
        CHECK(plain.find("= trial") == std::string::npos);
        CHECK(plain.find("within noise") == std::string::npos);
        CHECK(plain.find("2 configurations") != std::string::npos);
    }
    CHECK(measured_front_text({}).empty());
}

TEST_CASE("the sweep's end-of-run front gives the estimate's error against the real peak", "[report][memory]") {
    // The allocator counted 100 MiB (baseline included); the process held 104; the estimate said 104.
    TrialRecord t = member(11, 100 << 20, 1000, 0.1, 0.001);
    t.result.real_peak = 104ull << 20;
    t.result.estimate = Estimate{};
    t.result.estimate->memory.peak = 104ull << 20;
    const std::string text = measured_front_text(std::vector<TrialRecord>{t});
    CHECK(text.find("real peak") != std::string::npos);
    CHECK(text.find("104.00 MiB") != std::string::npos);
    CHECK(text.find("+0.0%") != std::string::npos);  // against the real peak, not the allocator's (+4.0%)
    CHECK(text.find("+4.0%") == std::string::npos);
    CHECK(text.find("-3.8%") == std::string::npos);  // nor the old sign convention

    SECTION("without a real peak: against the allocator's, estimate minus measured") {
        t.result.real_peak = 0;
        const std::string old = measured_front_text(std::vector<TrialRecord>{t});
        CHECK(old.find("+4.0%") != std::string::npos);
    }
}

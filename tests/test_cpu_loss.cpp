// CPU cross-entropy (fused forward + backward) against a double reference
// and central differences of the mean loss; the chunked LM head + loss
// equals the unchunked one and the composition of its parts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "kernels/lm_head_loss.h"
#include "tests/backend_test_util.h"

using namespace tune::kernels;
using tune::testing::numeric_grad;
using tune::testing::random_floats;
using tune::testing::rel_error;
using tune::testing::widen;

namespace {

// Mean over non-ignored rows of logsumexp - logit[target].
double mean_loss_ref(const std::vector<double>& z, const std::vector<std::int32_t>& t, std::int64_t v) {
    double total = 0;
    std::int64_t count = 0;
    for (std::size_t r = 0; r < t.size(); ++r) {
        if (t[r] < 0) continue;
        double mx = -1e300, sum = 0;
        for (std::int64_t j = 0; j < v; ++j) mx = std::max(mx, z[r * v + j]);
        for (std::int64_t j = 0; j < v; ++j) sum += std::exp(z[r * v + j] - mx);
        total += mx + std::log(sum) - z[r * v + t[r]];
        ++count;
    }
    return total / static_cast<double>(count);
}

struct HeadRun {
    std::vector<float> losses, dx, dw;
};

HeadRun run_head(std::int64_t chunk, DType t, const std::vector<float>& x, const std::vector<float>& w,
                 const std::vector<std::int32_t>& targets, std::int64_t N, std::int64_t C, std::int64_t V) {
    CpuBackend backend;
    HeadRun r{std::vector<float>(N), std::vector<float>(N * C), std::vector<float>(V * C, 0.25f)};
    std::vector<std::uint16_t> x16, w16, dx16(N * C), dw16;
    LmHeadLossArgs a{.rows = N,
                     .hidden = C,
                     .vocab = V,
                     .chunk_rows = chunk,
                     .dtype = t,
                     .x = x.data(),
                     .weight = w.data(),
                     .targets = targets.data(),
                     .losses = r.losses.data(),
                     .dx = r.dx.data(),
                     .dweight = r.dw.data(),
                     .grad_scale = 1.0f / static_cast<float>(N)};
    if (t != DType::f32) {
        x16 = tune::testing::to_storage(x, t);
        w16 = tune::testing::to_storage(w, t);
        dw16 = tune::testing::to_storage(r.dw, t);
        a.x = x16.data(), a.weight = w16.data(), a.dx = dx16.data(), a.dweight = dw16.data();
    }
    std::vector<float> ws(lm_head_loss_workspace_bytes(backend, a) / 4);
    lm_head_loss(backend, a, Workspace{ws.data(), ws.size() * 4});
    if (t != DType::f32) {
        r.dx = tune::testing::from_storage(dx16, t);
        r.dw = tune::testing::from_storage(dw16, t);
    }
    return r;
}

}  // namespace

TEST_CASE("cpu cross-entropy: losses and the mean-loss gradient, ignored rows", "[cpu][loss]") {
    CpuBackend backend;
    const std::int64_t N = 4, V = 11;
    const std::vector<std::int32_t> targets{3, -1, 10, 0};
    const auto z = random_floats(N * V, 1, 3.0f);
    std::vector<float> losses(N), dz(N * V);
    backend.cross_entropy({.rows = N,
                           .vocab = V,
                           .logits = z.data(),
                           .targets = targets.data(),
                           .losses = losses.data(),
                           .dlogits = dz.data(),
                           .grad_scale = 1.0f / 3.0f});
    double mean = 0;
    for (float l : losses) mean += l / 3.0;
    CHECK(mean == Approx(mean_loss_ref(widen(z), targets, V)).epsilon(1e-6));
    CHECK(losses[1] == 0.0f);
    const auto g = numeric_grad([&](const auto& v) { return mean_loss_ref(v, targets, V); }, widen(z));
    CHECK(rel_error(dz, g) < 1e-5);

    // In place (dlogits over the logits) gives the same gradient.
    auto inplace = z;
    backend.cross_entropy({.rows = N,
                           .vocab = V,
                           .logits = inplace.data(),
                           .targets = targets.data(),
                           .losses = losses.data(),
                           .dlogits = inplace.data(),
                           .grad_scale = 1.0f / 3.0f});
    CHECK(inplace == dz);

    const std::vector<std::int32_t> bad{0, 11, 0, 0};
    CHECK_THROWS_AS(backend.cross_entropy(
                        {.rows = N, .vocab = V, .logits = z.data(), .targets = bad.data(), .losses = losses.data()}),
                    tune::BackendError);
}

TEST_CASE("cpu lm head loss: chunked equals unchunked and the plain composition", "[cpu][loss]") {
    const std::int64_t N = 10, C = 6, V = 13;
    const auto x = random_floats(N * C, 1), w = random_floats(V * C, 2);
    std::vector<std::int32_t> targets(N);
    for (std::int64_t i = 0; i < N; ++i) targets[i] = static_cast<std::int32_t>((i * 5) % V);
    targets[4] = -1;

    const HeadRun whole = run_head(0, DType::f32, x, w, targets, N, C, V);
    for (std::int64_t chunk : {1, 3, 4}) {
        INFO("chunk " << chunk);
        const HeadRun part = run_head(chunk, DType::f32, x, w, targets, N, C, V);
        CHECK(rel_error(part.losses, widen(whole.losses)) < 1e-6);
        CHECK(rel_error(part.dx, widen(whole.dx)) < 1e-6);
        CHECK(rel_error(part.dw, widen(whole.dw)) < 1e-6);
    }

    // Against double: loss(x, w) = sum of per-row losses / N.
    auto loss = [&](const std::vector<double>& xs, const std::vector<double>& ws) {
        std::vector<double> z(N * V, 0.0);
        for (std::int64_t r = 0; r < N; ++r)
            for (std::int64_t v = 0; v < V; ++v)
                for (std::int64_t c = 0; c < C; ++c) z[r * V + v] += xs[r * C + c] * ws[v * C + c];
        return mean_loss_ref(z, targets, V) * 9.0 / static_cast<double>(N);  // 9 of 10 rows count
    };
    const auto gx = numeric_grad([&](const auto& v) { return loss(v, widen(w)); }, widen(x));
    auto gw = numeric_grad([&](const auto& v) { return loss(widen(x), v); }, widen(w));
    for (auto& v : gw) v += 0.25;  // dweight accumulates onto its initial value
    CHECK(rel_error(whole.dx, gx) < 1e-5);
    CHECK(rel_error(whole.dw, gw) < 1e-5);
}

TEST_CASE("cpu lm head loss: bf16 follows fp32 and sizes its workspace", "[cpu][loss]") {
    const std::int64_t N = 8, C = 16, V = 24;
    const auto x = tune::testing::rounded(random_floats(N * C, 3), DType::bf16);
    const auto w = tune::testing::rounded(random_floats(V * C, 4, 0.5f), DType::bf16);
    std::vector<std::int32_t> targets(N);
    for (std::int64_t i = 0; i < N; ++i) targets[i] = static_cast<std::int32_t>((i * 7) % V);
    const HeadRun ref = run_head(3, DType::f32, x, w, targets, N, C, V);
    const HeadRun half = run_head(3, DType::bf16, x, w, targets, N, C, V);
    CHECK(rel_error(half.losses, widen(ref.losses)) < 1e-5);  // logits are fp32 from bf16 inputs
    CHECK(rel_error(half.dx, widen(ref.dx)) < 2e-2);
    CHECK(rel_error(half.dw, widen(ref.dw)) < 2e-2);

    CpuBackend backend;
    const LmHeadLossArgs a{
        .rows = N, .hidden = C, .vocab = V, .chunk_rows = 3, .dtype = DType::bf16, .dx = reinterpret_cast<void*>(1)};
    auto al = [](std::uint64_t b) { return (b + 255) / 256 * 256; };
    // fp32 logits + bf16 dlogits of the chunk + staging of its largest GEMM (docs/memory-model.md, H).
    CHECK(lm_head_loss_workspace_bytes(backend, a) == al(4 * 3 * V) + al(2 * 3 * V) + al(4 * (3 * V + V * C + 3 * C)));
}

namespace {

// Shards on threads, each combining through shared arrays at a barrier, as ranks would over a collective.
class ThreadCombine final : public RowCombine {
public:
    ThreadCombine(std::barrier<>& sync, std::vector<std::vector<float>>& slots, std::size_t me)
        : sync_(sync), slots_(slots), me_(me) {}
    void max(float* v, std::int64_t n) const override { combine(v, n, true); }
    void sum(float* v, std::int64_t n) const override { combine(v, n, false); }

private:
    void combine(float* v, std::int64_t n, bool max) const {
        slots_[me_].assign(v, v + n);
        sync_.arrive_and_wait();
        for (std::int64_t i = 0; i < n; ++i) {
            float r = slots_[0][i];
            for (std::size_t k = 1; k < slots_.size(); ++k) r = max ? std::max(r, slots_[k][i]) : r + slots_[k][i];
            v[i] = r;
        }
        sync_.arrive_and_wait();  // every shard has read the slots before the next stage writes them
    }
    std::barrier<>& sync_;
    std::vector<std::vector<float>>& slots_;
    std::size_t me_;
};

}  // namespace

TEST_CASE("cpu lm head loss over vocabulary shards equals the whole vocabulary's", "[cpu][loss]") {
    // Megatron's parallel cross-entropy: each shard holds rows of the head, combines the rows'
    // max, sum of exponentials and target logit, and its dx is its part of a sum over shards.
    const std::int64_t N = 10, C = 6, V = 13, chunk = 4;
    const auto x = random_floats(N * C, 1), w = random_floats(V * C, 2);
    std::vector<std::int32_t> targets(N);
    for (std::int64_t i = 0; i < N; ++i) targets[i] = static_cast<std::int32_t>((i * 5) % V);
    targets[4] = -1;
    const HeadRun whole = run_head(chunk, DType::f32, x, w, targets, N, C, V);
    for (const std::vector<std::int64_t>& bounds :
         {std::vector<std::int64_t>{0, 7, 13}, std::vector<std::int64_t>{0, 4, 8, 13}}) {
        const std::size_t shards = bounds.size() - 1;
        INFO(shards << " shards");
        std::barrier<> sync(static_cast<std::ptrdiff_t>(shards));
        std::vector<std::vector<float>> slots(shards);
        std::vector<HeadRun> parts(shards);
        std::vector<std::thread> threads;
        for (std::size_t k = 0; k < shards; ++k)
            threads.emplace_back([&, k] {
                CpuBackend backend;
                const std::int64_t begin = bounds[k], rows = bounds[k + 1] - bounds[k];
                HeadRun& r = parts[k];
                r = {std::vector<float>(N), std::vector<float>(N * C), std::vector<float>(rows * C, 0.25f)};
                const ThreadCombine combine(sync, slots, k);
                LmHeadLossArgs a{.rows = N,
                                 .hidden = C,
                                 .vocab = rows,
                                 .chunk_rows = chunk,
                                 .dtype = DType::f32,
                                 .x = x.data(),
                                 .weight = w.data() + begin * C,
                                 .targets = targets.data(),
                                 .losses = r.losses.data(),
                                 .dx = r.dx.data(),
                                 .dweight = r.dw.data(),
                                 .grad_scale = 1.0f / static_cast<float>(N),
                                 .combine = &combine,
                                 .vocab_begin = begin,
                                 .vocab_total = V};
                std::vector<float> ws(lm_head_loss_workspace_bytes(backend, a) / 4);
                lm_head_loss(backend, a, Workspace{ws.data(), ws.size() * 4});
            });
        for (std::thread& t : threads) t.join();
        std::vector<float> dx(N * C, 0.0f);
        for (std::size_t k = 0; k < shards; ++k) {
            CHECK(rel_error(parts[k].losses, widen(whole.losses)) < 1e-6);
            for (std::int64_t i = 0; i < N * C; ++i) dx[i] += parts[k].dx[i];
            const std::vector<float> rows(whole.dw.begin() + bounds[k] * C, whole.dw.begin() + bounds[k + 1] * C);
            CHECK(rel_error(parts[k].dw, widen(rows)) < 1e-6);
        }
        CHECK(rel_error(dx, widen(whole.dx)) < 1e-6);
    }
}

// Whole-model finite-difference gradient check in fp32: for every parameter
// tensor of a two-layer Llama with grouped KV heads, and of one with every
// variant the trainer runs (biases, q/k norms, tied embeddings, head_dim,
// llama3 RoPE), the analytic gradient of the mean loss matches central
// differences of the loss.
#include <catch2/catch.hpp>

#include <random>

#include "support/trainer_fixture.h"
#include "train/model_state.h"

using namespace tune;

namespace {

// Elements to probe in one tensor: its largest gradients and a few spread out.
std::vector<std::int64_t> probes(const std::vector<float>& grad, const train::TensorView& t) {
    std::vector<std::int64_t> idx(static_cast<std::size_t>(t.numel()));
    for (std::int64_t i = 0; i < t.numel(); ++i) idx[static_cast<std::size_t>(i)] = i;
    std::partial_sort(idx.begin(), idx.begin() + 3, idx.end(), [&](std::int64_t a, std::int64_t b) {
        return std::abs(grad[static_cast<std::size_t>(t.offset + a)]) >
               std::abs(grad[static_cast<std::size_t>(t.offset + b)]);
    });
    std::vector<std::int64_t> out(idx.begin(), idx.begin() + 3);
    out.push_back(t.numel() / 3);
    out.push_back(t.numel() - 1);
    return out;
}

// Checks every tensor of `model`; returns the number of elements checked.
int check_gradients(const ModelSpec& model) {
    const TrialConfig c = test::trainer_config(model);
    const train::ParamLayout layout = train::make_param_layout(c.model, 1, c.adam8bit_block);
    train::HostParams params = train::random_init(layout, 7, 0.3);
    // Vectors away from their initial 0 (biases) and 1 (norms), so each one's use is seen.
    std::mt19937 rng(11);
    std::normal_distribution<float> noise(0.0f, 0.3f);
    for (std::size_t b = 0; b < layout.buffers(); ++b)
        for (const train::TensorView& v : layout.flat(b).tensors)
            if (!v.matrix())
                for (std::int64_t e = 0; e < v.numel(); ++e)
                    params[b][static_cast<std::size_t>(v.offset + e)] += noise(rng);
    test::TrainerRig rig(c, std::make_unique<test::FixedTokens>(c.model.vocab), &params);
    train::Trainer& t = *rig.trainer;
    t.compute_gradients();
    const train::HostParams grads = t.model().download_grads();

    const double delta = 1e-2;
    auto loss_at = [&](std::size_t buffer, std::int64_t element, double value) {
        train::HostParams p = params;
        p[buffer][static_cast<std::size_t>(element)] = static_cast<float>(value);
        t.model().upload(p);
        return t.compute_gradients();
    };
    int checked = 0;
    for (std::size_t b = 0; b < layout.buffers(); ++b) {
        for (std::size_t k = 0; k < layout.flat(b).tensors.size(); ++k) {
            const train::TensorView& view = layout.flat(b).tensors[k];
            for (std::int64_t e : probes(grads[b], view)) {
                const std::int64_t at = view.offset + e;
                const double w = params[b][static_cast<std::size_t>(at)];
                const double fd = (loss_at(b, at, w + delta) - loss_at(b, at, w - delta)) / (2 * delta);
                const double an = grads[b][static_cast<std::size_t>(at)];
                INFO(train::tensor_name(layout, b, k) << "[" << e << "]: analytic " << an << ", numeric " << fd);
                CHECK(std::abs(fd - an) <= 2e-4 + 2e-2 * std::abs(an));
                ++checked;
            }
        }
    }
    return checked;
}

}  // namespace

TEST_CASE("whole-model gradients match central finite differences (fp32)", "[trainer][gradcheck]") {
    CHECK(check_gradients(test::micro_model()) == 5 * (2 * 9 + 3));
}

TEST_CASE("whole-model gradients with q, k, v and gate, up fused match central finite differences (fp32)",
          "[trainer][gradcheck]") {
    CHECK(check_gradients(test::fusable_model()) == 5 * (2 * 9 + 3));
}

TEST_CASE("gradients of biases, q/k norms, tied embeddings, head_dim and llama3 RoPE match finite differences",
          "[trainer][gradcheck]") {
    // Per layer 9 + 7 biases + 2 norms; embedding (the head too) and final norm.
    CHECK(check_gradients(test::feature_model()) == 5 * (2 * 18 + 2));
}

// The trainer against PyTorch: scripts/make_torch_fixtures.py writes a tiny
// Llama and a tiny Qwen3 with every variant beyond it (biases, q/k norms,
// head_dim, tied embeddings, llama3 RoPE), each in Hugging Face layout with
// a token file and what torch computes for it:
// the loss, every gradient, and the weights after 3 AdamW steps with
// decoupled weight decay on matrices and grad-norm clipping. The weights are
// loaded the way `tune trial --init` loads them. Both attention kernels
// (flash, the default, and eager) must match.
#include <catch2/catch.hpp>

#include "support/trainer_fixture.h"
#include "train/io/data.h"
#include "train/io/hf_model.h"
#include "train/io/safetensors.h"

using namespace tune;

namespace {

const std::filesystem::path kFixtures = std::filesystem::path(TUNE_SOURCE_DIR) / "tests/fixtures/torch";
const std::filesystem::path kFixture = kFixtures / "llama_tiny";

// The fixture's training settings (scripts/make_torch_fixtures.py).
TrialConfig fixture_config(Attention attention = Attention::flash, const std::filesystem::path& dir = kFixture) {
    TrialConfig c = test::trainer_config(train::load_hf_config(dir));
    c.attention = attention;
    c.micro_batch = 2;
    c.context = 16;
    c.lr = 1e-3;
    c.weight_decay = 0.1;
    c.clip = 1.0;
    return c;
}

struct Rig {
    Rig(Attention attention, const std::string& fixture)
        : dir(kFixtures / fixture), config(fixture_config(attention, dir)) {}
    std::filesystem::path dir;
    TrialConfig config;
    train::ParamLayout layout = train::make_param_layout(config.model, 1, config.adam8bit_block);
    train::HostParams init = train::load_hf_weights(dir, layout);
    train::SafetensorsFile ref = train::SafetensorsFile::load(dir / "reference.safetensors");
    test::TrainerRig rig{config, train::file_tokens(dir / "tokens.bin", config.model.vocab), &init};
};

// Tensor k of buffer b of host params, as a flat vector.
std::vector<float> tensor_of(const train::HostParams& p, const train::ParamLayout& l, std::size_t b, std::size_t k) {
    const train::TensorView& v = l.flat(b).tensors[k];
    return {p[b].begin() + v.offset, p[b].begin() + v.offset + v.numel()};
}

}  // namespace

TEST_CASE("loss and every gradient match PyTorch (fp32)", "[trainer][torch]") {
    const Attention attention = GENERATE(Attention::flash, Attention::eager);
    const std::string fixture = GENERATE(as<std::string>{}, "llama_tiny", "qwen3_tiny");
    INFO(fixture << ", attention " << to_string(attention));
    Rig r(attention, fixture);
    const double loss = r.rig.trainer->compute_gradients();
    CHECK(loss == Approx(r.ref.read_f32("loss")[0]).epsilon(1e-5));
    const train::HostParams grads = r.rig.trainer->model().download_grads();
    for (std::size_t b = 0; b < r.layout.buffers(); ++b) {
        for (std::size_t k = 0; k < r.layout.flat(b).tensors.size(); ++k) {
            const std::string name = train::tensor_name(r.layout, b, k);
            const std::vector<float> want = r.ref.read_f32("grad." + name);
            const std::vector<float> got = tensor_of(grads, r.layout, b, k);
            INFO(name << ": max |diff| " << test::max_abs_diff(got, want) << ", max |grad| " << test::max_abs(want));
            // fp32 on both sides; different summation orders.
            CHECK(test::max_abs_diff(got, want) <= 1e-5 * std::max(1.0, test::max_abs(want)));
        }
    }
}

TEST_CASE("weights after 3 AdamW steps with clipping match PyTorch (fp32)", "[trainer][torch]") {
    const Attention attention = GENERATE(Attention::flash, Attention::eager);
    const std::string fixture = GENERATE(as<std::string>{}, "llama_tiny", "qwen3_tiny");
    INFO(fixture << ", attention " << to_string(attention));
    Rig r(attention, fixture);
    const std::vector<float> losses = r.ref.read_f32("losses");
    for (int s = 0; s < 3; ++s) {
        const train::StepStats stats = r.rig.trainer->step();
        CHECK(stats.loss == Approx(losses[static_cast<std::size_t>(s)]).epsilon(1e-5));
    }
    const train::HostParams weights = r.rig.trainer->model().download_weights();
    for (std::size_t b = 0; b < r.layout.buffers(); ++b) {
        for (std::size_t k = 0; k < r.layout.flat(b).tensors.size(); ++k) {
            const std::string name = train::tensor_name(r.layout, b, k);
            const std::vector<float> want = r.ref.read_f32("step3." + name);
            const std::vector<float> got = tensor_of(weights, r.layout, b, k);
            INFO(name << ": max |diff| " << test::max_abs_diff(got, want));
            // Three steps of lr 1e-3 move a weight by up to 3e-3; agree to 1% of that.
            CHECK(test::max_abs_diff(got, want) <= 3e-5);
        }
    }
}

TEST_CASE("init loading rejects missing, extra and mis-shaped tensors and bad dtypes", "[trainer][torch]") {
    const TrialConfig c = fixture_config();
    const auto dir = std::filesystem::path(TUNE_BUILD_DIR) / "test_torch_reference_bad";
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(kFixture / "config.json", dir / "config.json",
                               std::filesystem::copy_options::overwrite_existing);
    const train::ParamLayout layout = train::make_param_layout(c.model, 1, c.adam8bit_block);
    const train::SafetensorsFile good = train::SafetensorsFile::load(kFixture / "model.safetensors");
    auto write_without = [&](const std::string& drop, std::vector<train::NamedTensor> extra) {
        for (const auto& [name, e] : good.entries())
            if (name != drop) extra.push_back({name, e.shape, good.read_f32(name)});
        train::write_safetensors(dir / "model.safetensors", extra);
    };
    write_without("model.norm.weight", {});
    CHECK_THROWS_WITH(train::load_hf_weights(dir, layout), Catch::Contains("missing tensors: model.norm.weight"));
    write_without("", {{"model.extra.weight", {2}, {1.0f, 2.0f}}});
    CHECK_THROWS_WITH(train::load_hf_weights(dir, layout), Catch::Contains("unexpected tensors: model.extra.weight"));
    write_without("model.norm.weight", {{"model.norm.weight", {3}, {1.0f, 1.0f, 1.0f}}});
    CHECK_THROWS_WITH(train::load_hf_weights(dir, layout), Catch::Contains("model.norm.weight is [3], expected [32]"));
}

// Optimizer cases, each precision the trainer uses: fp32 everything; mixed
// (fp32 master, 16-bit gradients scaled by grad_scale, a 16-bit model copy);
// pure bf16 (weights, gradients, states). 5000 elements leave a partial
// 8-bit block; a short tensor without weight decay is the norm-weight path;
// AdamW, Lion and SGD also take a run of tensors in one call, with undecayed
// stretches at its start, inside and at its end (ParamTensor::undecayed), and
// the gradients' multiplier read from device memory (grad_multiplier); and a
// tensor one element into its buffers, so no access can be 16 bytes.
#include <fmt/format.h>

#include <iterator>
#include <limits>

#include "kernels/selftest/case_builder.h"
#include "kernels/selftest/cases.h"

namespace tune::kernels::selftest {

namespace {

struct Precision {
    const char* label;
    DType param, grad, state;
    bool copy;  // a 16-bit model copy (dtype = grad's)
    float grad_scale;
};

constexpr Precision kPrecisions[] = {
    {"f32", DType::f32, DType::f32, DType::f32, false, 1.0f},
    {"f32/bf16", DType::f32, DType::bf16, DType::f32, true, 0.5f},
    {"f32/f16", DType::f32, DType::f16, DType::f32, true, 1.0f / 1024.0f},
    {"bf16", DType::bf16, DType::bf16, DType::bf16, false, 1.0f},
};

struct Tensor {
    std::int64_t n;
    bool decay;
    bool run = false;         // kUndecayed's stretches take no decay
    std::int64_t offset = 0;  // elements into every buffer the tensor starts at
};
constexpr Tensor kTensors[] = {{5000, true}, {300, false}};
constexpr ElementRange kUndecayed[] = {{0, 300}, {2048, 2100}, {2100, 2101}, {4990, 5000}};
constexpr Tensor kRun{5000, true, true};
// One element in, no buffer is 16-byte aligned: the element loop steps one element at a time.
constexpr Tensor kUnaligned{1001, true, false, 1};

// Element i of a buffer of `dtype`.
void* element(void* base, DType dtype, std::int64_t i) {
    return static_cast<unsigned char*>(base) + static_cast<std::uint64_t>(i) * dtype_bytes(dtype);
}

// The tensors every optimizer reads and writes: param, grad (and copy).
struct ParamIndices {
    std::size_t param, grad, copy;
    std::size_t multiplier = 0;  // a run's device multiplier of the gradients (gradient_multiplier's output)
};

ParamIndices add_param(CaseBuilder& cb, const Precision& p, std::int64_t n) {  // n: elements with the offset
    ParamIndices ix{};
    ix.param = cb.normal("param", p.param, n, 0.05f);
    cb.mark_output(ix.param, OpClass::optimizer);
    // Gradients as the loss scale leaves them: grad_scale brings them back to ~0.01.
    ix.grad = cb.normal("grad", p.grad, n, 0.01f / p.grad_scale);
    ix.copy = p.copy ? cb.zero_output("param_copy", p.grad, n, OpClass::optimizer) : ix.param;
    ix.multiplier = cb.values("grad_multiplier", DType::f32, {0.75f});
    return ix;
}

ParamTensor param_tensor(const Precision& p, const Tensor& t, const ParamIndices& ix, const DeviceTensors& d) {
    ParamTensor pt;
    pt.n = t.n;
    pt.param = element(d[ix.param], p.param, t.offset), pt.param_dtype = p.param;
    pt.grad = element(d[ix.grad], p.grad, t.offset), pt.grad_dtype = p.grad, pt.grad_scale = p.grad_scale;
    pt.param_copy = p.copy ? element(d[ix.copy], p.grad, t.offset) : nullptr, pt.copy_dtype = p.grad;
    pt.decay = t.decay;
    if (t.run) pt.undecayed = kUndecayed, pt.undecayed_count = std::size(kUndecayed);
    if (t.run) pt.grad_multiplier = d.as<float>(ix.multiplier);
    return pt;
}

std::string label(const Tensor& t, const char* extra = "") {
    return fmt::format("n={}{}{}{}{}", t.n, t.decay ? "" : " no-decay",
                       t.run ? " run of tensors, device multiplier" : "", t.offset != 0 ? " unaligned" : "", extra);
}

// A run's weight decay is large, so a stretch updated with the wrong decay shows past the tolerance.
void adamw_lion_sgd(std::vector<Case>& out, const Precision& p, const Tensor& t) {
    const float decay_boost = t.run ? 100.0f : 1.0f;
    out.push_back({"adamw_update", p.label, label(t), [=](std::uint64_t seed) {
                       CaseBuilder cb(seed);
                       const ParamIndices ix = add_param(cb, p, t.n + t.offset);
                       const auto m = cb.normal("m", p.state, t.n + t.offset, 0.01f);
                       const auto v = cb.uniform("v", p.state, t.n + t.offset, 0.0f, 1e-4f);
                       cb.mark_output(m, OpClass::optimizer);
                       cb.mark_output(v, OpClass::optimizer);
                       return cb.build([=](Backend& be, DeviceTensors& d) {
                           AdamWParams hp;
                           hp.lr = 1e-3f, hp.weight_decay = 0.1f * decay_boost, hp.step = 3;
                           be.adamw_update(param_tensor(p, t, ix, d), element(d[m], p.state, t.offset),
                                           element(d[v], p.state, t.offset), p.state, hp);
                       });
                   }});
    out.push_back({"lion_update", p.label, label(t), [=](std::uint64_t seed) {
                       CaseBuilder cb(seed);
                       const ParamIndices ix = add_param(cb, p, t.n + t.offset);
                       const auto m = cb.normal("m", p.state, t.n + t.offset, 0.01f);
                       cb.mark_output(m, OpClass::optimizer);
                       return cb.build([=](Backend& be, DeviceTensors& d) {
                           LionParams hp;
                           hp.lr = 1e-4f, hp.weight_decay = 0.1f * decay_boost;
                           be.lion_update(param_tensor(p, t, ix, d), element(d[m], p.state, t.offset), p.state, hp);
                       });
                   }});
    out.push_back({"sgd_update", p.label, label(t), [=](std::uint64_t seed) {
                       CaseBuilder cb(seed);
                       const ParamIndices ix = add_param(cb, p, t.n + t.offset);
                       return cb.build([=](Backend& be, DeviceTensors& d) {
                           SgdParams hp;
                           hp.lr = 1e-2f, hp.weight_decay = 0.01f * decay_boost;
                           be.sgd_update(param_tensor(p, t, ix, d), hp);
                       });
                   }});
}

// block: the quantization block (bitsandbytes uses 256; others take the
// CUDA kernel's other thread counts). nonfinite: an inf and a NaN gradient,
// whose elements must keep their weights on both backends.
Case adam8bit_case(const Precision& p, const Tensor& t, std::int64_t block, bool nonfinite) {
    const std::string extra = fmt::format(" block={}{}", block, nonfinite ? " inf/nan grads" : "");
    return {"adam8bit_update", p.label, label(t, extra.c_str()), [=](std::uint64_t seed) {
                CaseBuilder cb(seed);
                const ParamIndices ix = add_param(cb, p, t.n);
                if (nonfinite) {
                    cb.set(ix.grad, 7, std::numeric_limits<float>::infinity());
                    cb.set(ix.grad, t.n - 2, std::numeric_limits<float>::quiet_NaN());
                }
                const std::int64_t blocks = (t.n + block - 1) / block;
                const auto mq = cb.bytes("m_codes", t.n);
                const auto vq = cb.bytes("v_codes", t.n);
                const auto am = cb.uniform("absmax_m", DType::f32, blocks, 1e-3f, 2e-2f);
                const auto av = cb.uniform("absmax_v", DType::f32, blocks, 1e-5f, 1e-4f);
                cb.mark_output(mq, OpClass::codes);
                cb.mark_output(vq, OpClass::codes);
                cb.mark_output(am, OpClass::optimizer);
                cb.mark_output(av, OpClass::optimizer);
                return cb.build([=](Backend& be, DeviceTensors& d) {
                    Adam8bitParams hp;
                    hp.adam.lr = 1e-3f, hp.adam.weight_decay = 0.1f, hp.adam.step = 3, hp.block_size = block;
                    be.adam8bit_update(param_tensor(p, t, ix, d), d.as<std::uint8_t>(mq), d.as<std::uint8_t>(vq),
                                       d.as<float>(am), d.as<float>(av), hp);
                });
            }};
}

void adam8bit(std::vector<Case>& out, const Precision& p, const Tensor& t) {
    out.push_back(adam8bit_case(p, t, 256, false));
    if (t.n < 4096) return;  // the other block sizes once per precision, on the long tensor
    out.push_back(adam8bit_case(p, t, 64, true));
    out.push_back(adam8bit_case(p, t, 2048, false));
}

void adafactor(std::vector<Case>& out, const Precision& p) {
    struct Shape {
        std::int64_t rows, cols;
        bool decay;
    };
    for (const Shape s : {Shape{50, 100, true}, Shape{300, 1, false}}) {
        const Tensor t{s.rows * s.cols, s.decay};
        out.push_back({"adafactor_update", p.label, fmt::format("{}x{}{}", s.rows, s.cols, s.cols > 1 ? "" : " vector"),
                       [=](std::uint64_t seed) {
                           CaseBuilder cb(seed);
                           const ParamIndices ix = add_param(cb, p, t.n);
                           const auto row = cb.uniform("row_stat", p.state, s.rows, 1e-5f, 1e-4f);
                           const auto col = cb.uniform("col_stat", p.state, s.cols, 1e-5f, 1e-4f);
                           cb.mark_output(row, OpClass::optimizer);
                           if (s.cols > 1) cb.mark_output(col, OpClass::optimizer);
                           return cb.build([=](Backend& be, DeviceTensors& d) {
                               AdafactorParams hp;
                               hp.step = 5, hp.weight_decay = 0.01f;
                               be.adafactor_update(param_tensor(p, t, ix, d), s.rows, s.cols, d[row], d[col], p.state,
                                                   hp);
                           });
                       }});
    }
}

// A (rows, cols) tensor split between emulated ZeRO ranks.
struct Split {
    std::int64_t rows, cols;
    bool decay;
    std::vector<std::int64_t> bounds;  // rank k's piece is elements [bounds[k], bounds[k + 1])
    bool factored() const { return rows > 1 && cols > 1; }
    std::size_t ranks() const { return bounds.size() - 1; }
};

// The three piece ops (adafactor_partial_sums, _statistics, _apply), one
// process standing in for the ranks: param_sq and the row and column sums
// are accumulators every rank adds into (what the all-reduce leaves on each
// rank); a matrix's replicated statistics, row_mean and update_sq are one
// per rank (statistics() updates the whole statistics on every call), and
// the ranks' update_sq are summed with add() before the updates.
CaseData adafactor_pieces_case(const Precision& p, const Split& s, std::uint64_t seed) {
    const Tensor t{s.rows * s.cols, s.decay};
    const bool factored = s.factored();
    const std::size_t ranks = s.ranks();
    CaseBuilder cb(seed);
    const ParamIndices ix = add_param(cb, p, t.n);
    // Matrices: (rows) and (cols), a copy per rank; vectors: (n), each rank reads its piece's part.
    std::vector<std::size_t> row{cb.uniform("row_stat", p.state, factored ? s.rows : t.n, 1e-5f, 1e-4f)};
    std::vector<std::size_t> col{cb.uniform("col_stat", p.state, factored ? s.cols : 1, 1e-5f, 1e-4f)};
    cb.mark_output(row[0], OpClass::optimizer);
    if (factored) {
        cb.mark_output(col[0], OpClass::optimizer);
        for (std::size_t k = 1; k < ranks; ++k) {
            row.push_back(cb.zero_output(fmt::format("row_stat rank {}", k), p.state, s.rows, OpClass::optimizer));
            col.push_back(cb.zero_output(fmt::format("col_stat rank {}", k), p.state, s.cols, OpClass::optimizer));
        }
    }
    // fp32 sums, zero; those a matrix fills are compared.
    const auto sums = [&](const char* name, std::int64_t n, bool compared) {
        return compared ? cb.zero_output(name, DType::f32, n, OpClass::reduction)
                        : cb.values(name, DType::f32, std::vector<float>(static_cast<std::size_t>(n), 0.0f));
    };
    const auto n_ranks = static_cast<std::int64_t>(ranks);
    const auto row_sums = sums("row_sums", s.rows, factored);
    const auto col_sums = sums("col_sums", s.cols, factored);
    const auto row_mean = sums("row_mean per rank", n_ranks, factored);
    const auto param_sq = sums("param_sq", 1, false);
    const auto update_sq = sums("update_sq per rank", n_ranks, false);
    const auto update_total = sums("update_sq", 1, false);
    return cb.build([=](Backend& be, DeviceTensors& d) {
        AdafactorParams hp;
        hp.step = 5, hp.weight_decay = 0.01f;
        for (std::size_t k = 1; k < row.size(); ++k) {  // every rank starts from the same replicated statistics
            be.copy(d[row[k]], d[row[0]], static_cast<std::uint64_t>(s.rows) * dtype_bytes(p.state));
            be.copy(d[col[k]], d[col[0]], static_cast<std::uint64_t>(s.cols) * dtype_bytes(p.state));
        }
        const auto piece = [&](std::size_t k) {
            const std::int64_t begin = s.bounds[k];
            AdafactorPiece pc;
            pc.p = param_tensor(p, t, ix, d);
            pc.p.n = s.bounds[k + 1] - begin;
            pc.p.param = element(d[ix.param], p.param, begin);
            pc.p.grad = element(d[ix.grad], p.grad, begin);
            if (p.copy) pc.p.param_copy = element(d[ix.copy], p.grad, begin);
            pc.begin = begin, pc.rows = s.rows, pc.cols = s.cols, pc.state = p.state;
            pc.row_stat = factored ? d[row[k]] : element(d[row[0]], p.state, begin);
            pc.col_stat = factored ? d[col[k]] : nullptr;
            return pc;
        };
        float* mean = d.as<float>(row_mean);
        float* usq = d.as<float>(update_sq);
        for (std::size_t k = 0; k < ranks; ++k)
            be.adafactor_partial_sums(piece(k), d.as<float>(param_sq), d.as<float>(row_sums), d.as<float>(col_sums),
                                      hp);
        for (std::size_t k = 0; k < ranks; ++k)
            be.adafactor_statistics(piece(k), d.as<float>(row_sums), d.as<float>(col_sums), mean + k, usq + k, hp);
        for (std::size_t k = 0; k < ranks; ++k) be.add(d[update_total], d[update_total], usq + k, 1, DType::f32);
        for (std::size_t k = 0; k < ranks; ++k)
            be.adafactor_apply(piece(k), d.as<float>(param_sq), mean + k, d.as<float>(update_total), hp);
    });
}

// The matrix's pieces end inside rows, one lies inside a single row and one
// is empty (its rank still updates the statistics); the vector is halved.
void adafactor_pieces(std::vector<Case>& out, const Precision& p) {
    const Split splits[] = {{50, 100, true, {0, 1234, 1290, 1290, 5000}}, {1, 300, false, {0, 137, 300}}};
    for (const Split& s : splits) {
        const std::string shape =
            fmt::format("{}x{}{} in {} pieces", s.rows, s.cols, s.factored() ? "" : " vector", s.ranks());
        out.push_back({"adafactor_pieces",
                       p.label,
                       shape,
                       [=](std::uint64_t seed) { return adafactor_pieces_case(p, s, seed); },
                       {"adafactor_partial_sums", "adafactor_statistics", "adafactor_apply"}});
    }
}

}  // namespace

void add_optimizer_cases(std::vector<Case>& out) {
    for (const Precision& p : kPrecisions) {
        for (const Tensor& t : kTensors) {
            adamw_lion_sgd(out, p, t);
            adam8bit(out, p, t);
        }
        adamw_lion_sgd(out, p, kRun);
        adamw_lion_sgd(out, p, kUnaligned);
        adafactor(out, p);
        adafactor_pieces(out, p);
    }
}

}  // namespace tune::kernels::selftest

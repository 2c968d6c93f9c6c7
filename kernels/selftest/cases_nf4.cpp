// NF4 cases (QLoRA's frozen base): quantizing a buffer of normal weights,
// with one all-zero block and a partial second-level block of 256 absmax
// values, must give the same bytes on both backends (codes, 8-bit absmax,
// scales, offset); dequantizing them the same weights in every dtype.
#include <fmt/format.h>

#include "kernels/math/nf4.h"
#include "kernels/selftest/case_builder.h"
#include "kernels/selftest/cases.h"

namespace tune::kernels::selftest {

namespace {

constexpr std::int64_t kN = 64 * (256 + 45);

std::size_t quantized(CaseBuilder& cb, std::size_t* x) {
    *x = cb.normal("x", DType::f32, kN, 0.02f);
    for (std::int64_t i = 64; i < 128; ++i) cb.set(*x, i, 0.0f);
    return cb.zero_output("q", DType::u8, math::nf4_sizes(kN).bytes, OpClass::exact);
}

}  // namespace

void add_nf4_cases(std::vector<Case>& out) {
    const std::string shape = fmt::format("n={}", kN);
    out.push_back({"nf4_quantize", "f32", shape, [](std::uint64_t seed) {
                       CaseBuilder cb(seed);
                       std::size_t x = 0;
                       const auto q = quantized(cb, &x);
                       const auto absmax = cb.zero_output("absmax", DType::f32, kN / 64, OpClass::exact);
                       return cb.build([=](Backend& be, DeviceTensors& d) {
                           be.nf4_quantize(d[q], d.as<float>(x), kN, d.as<float>(absmax));
                       });
                   }});
    for (const DType t : {DType::f32, DType::bf16, DType::f16}) {
        out.push_back({"nf4_dequantize", name_of(t), shape, [=](std::uint64_t seed) {
                           CaseBuilder cb(seed);
                           std::size_t x = 0;
                           const auto q = quantized(cb, &x);
                           const auto absmax = cb.zero_output("absmax", DType::f32, kN / 64, OpClass::exact);
                           const auto w = cb.zero_output("w", t, kN, OpClass::exact);
                           return cb.build([=](Backend& be, DeviceTensors& d) {
                               be.nf4_quantize(d[q], d.as<float>(x), kN, d.as<float>(absmax));
                               be.nf4_dequantize(d[w], t, d[q], kN, 0, kN);
                           });
                       }});
    }
}

}  // namespace tune::kernels::selftest

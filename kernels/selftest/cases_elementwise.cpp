// Element-wise op cases: odd lengths (no vector-width assumptions), every
// cast direction, unscale with and without an injected inf, and a partial
// square norm that adds to an existing sum.
#include <fmt/format.h>

#include <limits>

#include "kernels/selftest/case_builder.h"
#include "kernels/selftest/cases.h"

namespace tune::kernels::selftest {

namespace {

constexpr std::int64_t kN = 4099;

std::string n_label(std::int64_t n) { return fmt::format("n={}", n); }

void simple_cases(std::vector<Case>& out, DType t) {
    out.push_back({"add", name_of(t), n_label(kN), [=](std::uint64_t seed) {
                       CaseBuilder cb(seed);
                       const auto a = cb.normal("a", t, kN);
                       const auto b = cb.normal("b", t, kN);
                       cb.mark_output(a, OpClass::exact);  // out aliases a, as the residual does
                       return cb.build([=](Backend& be, DeviceTensors& d) { be.add(d[a], d[a], d[b], kN, t); });
                   }});
    out.push_back({"scale", name_of(t), n_label(kN), [=](std::uint64_t seed) {
                       CaseBuilder cb(seed);
                       const auto x = cb.normal("x", t, kN);
                       cb.mark_output(x, OpClass::exact);
                       return cb.build([=](Backend& be, DeviceTensors& d) { be.scale(d[x], kN, 0.37f, t); });
                   }});
    out.push_back({"neftune_noise", name_of(t), n_label(kN), [=](std::uint64_t seed) {
                       CaseBuilder cb(seed);
                       const auto x = cb.normal("x", t, kN);
                       cb.mark_output(x, OpClass::elementwise);
                       return cb.build([=](Backend& be, DeviceTensors& d) {
                           be.neftune_noise(d[x], kN, 0.05f, 0x5eedull + seed, t);
                       });
                   }});
    out.push_back({"sum_squares", name_of(t), n_label(100003), [=](std::uint64_t seed) {
                       CaseBuilder cb(seed);
                       const auto x = cb.normal("x", t, 100003);
                       const auto sum = cb.values("sum", DType::f32, {12.5f});
                       cb.mark_output(sum, OpClass::reduction);
                       return cb.build([=](Backend& be, DeviceTensors& d) {
                           be.sum_squares(d.as<float>(sum), d[x], 100003, t);
                       });
                   }});
    for (const bool inject : {false, true}) {
        for (const float s : {1.0f / 1024.0f, 1.0f}) {
            const std::string label = n_label(kN) + (inject ? " with inf" : "") + (s == 1.0f ? " check-only" : "");
            out.push_back({"unscale", name_of(t), label, [=](std::uint64_t seed) {
                               CaseBuilder cb(seed);
                               const auto x = cb.normal("x", t, kN, 1000.0f);
                               if (inject) cb.set(x, 1234, std::numeric_limits<float>::infinity());
                               cb.mark_output(x, OpClass::exact);
                               const auto found = cb.zero_output("found_inf", DType::f32, 1, OpClass::exact);
                               return cb.build([=](Backend& be, DeviceTensors& d) {
                                   be.unscale(d[x], kN, s, d.as<float>(found), t);
                               });
                           }});
        }
    }
}

void cast_cases(std::vector<Case>& out) {
    for (DType src : kFloatTypes)
        for (DType dst : kFloatTypes) {
            out.push_back({"cast", name_of(src) + "->" + name_of(dst), n_label(kN), [=](std::uint64_t seed) {
                               CaseBuilder cb(seed);
                               // Wide range: fp16 overflow to inf and subnormals are part of the test.
                               const auto x = cb.normal("x", src, kN, 3000.0f);
                               const auto y = cb.zero_output("y", dst, kN, OpClass::exact);
                               return cb.build([=](Backend& be, DeviceTensors& d) { be.cast(d[y], dst, d[x], src, kN); });
                           }});
        }
}

}  // namespace

void add_elementwise_cases(std::vector<Case>& out) {
    for (DType t : kFloatTypes) simple_cases(out, t);
    cast_cases(out);
}

}  // namespace tune::kernels::selftest

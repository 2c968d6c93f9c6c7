// Element-wise op cases: odd lengths (no vector-width assumptions), an add
// one element into its buffers (no 16-byte access), every
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
    // One element into both buffers: no access can be 16 bytes.
    out.push_back({"add", name_of(t), n_label(kN - 1) + " unaligned", [=](std::uint64_t seed) {
                       CaseBuilder cb(seed);
                       const auto a = cb.normal("a", t, kN);
                       const auto b = cb.normal("b", t, kN);
                       cb.mark_output(a, OpClass::exact);
                       return cb.build([=](Backend& be, DeviceTensors& d) {
                           const auto at = [&](std::size_t x) {
                               return static_cast<unsigned char*>(d[x]) + dtype_bytes(t);
                           };
                           be.add(at(a), at(a), at(b), kN - 1, t);
                       });
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
                       return cb.build(
                           [=](Backend& be, DeviceTensors& d) { be.sum_squares(d.as<float>(sum), d[x], 100003, t); });
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
                               return cb.build(
                                   [=](Backend& be, DeviceTensors& d) { be.cast(d[y], dst, d[x], src, kN); });
                           }});
        }
}

// The clip multiplier from one sum and from a sum less the squares counted twice (tensor parallelism),
// clipping (a norm of 2.06 over max 1) and not, with a loss scale.
void gradient_multiplier_cases(std::vector<Case>& out) {
    struct Sums {
        std::vector<float> sums;
        float max_norm, loss_scale;
    };
    for (const Sums& s : {Sums{{4.25f}, 1.0f, 1.0f}, Sums{{20.0f, 3.0f}, 1.0f, 2.0f}, Sums{{0.5f}, 1.0f, 1.0f},
                          Sums{{9.0f, 1.0f}, 0.0f, 4.0f}}) {
        const std::string label =
            fmt::format("sums={} max_norm={} loss_scale={}", s.sums.size(), s.max_norm, s.loss_scale);
        out.push_back({"gradient_multiplier", "f32", label, [=](std::uint64_t seed) {
                           CaseBuilder cb(seed);
                           const auto sums = cb.values("sums", DType::f32, s.sums);
                           const auto y = cb.zero_output("multiplier", DType::f32, 1, OpClass::reduction);
                           const auto count = static_cast<std::int64_t>(s.sums.size());
                           return cb.build([=](Backend& be, DeviceTensors& d) {
                               be.gradient_multiplier(d.as<float>(y), d.as<float>(sums), count, s.max_norm,
                                                      s.loss_scale);
                           });
                       }});
    }
}

}  // namespace

void add_elementwise_cases(std::vector<Case>& out) {
    for (DType t : kFloatTypes) simple_cases(out, t);
    cast_cases(out);
    gradient_multiplier_cases(out);
}

}  // namespace tune::kernels::selftest

// Self-test cases on the emulated device against the CPU backend, with each
// case's margin (the worst output's error as a fraction of its tolerance).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/selftest/selftest.h"

namespace tune_emu_test {

namespace st = tune::kernels::selftest;

constexpr std::uint64_t kSeed = 20240611;  // tune selftest's default seed

// The worst output's error over its tolerance, NMSE or max error, whichever is larger.
inline double margin(const st::CaseResult& r) {
    double most = 0;
    for (const auto& o : r.outputs) {
        const double nmse =
            o.tolerance.max_nmse > 0 ? o.stats.nmse / o.tolerance.max_nmse : (o.stats.nmse > 0 ? 1e9 : 0);
        const double abs =
            o.tolerance.max_abs > 0 ? o.stats.max_abs / o.tolerance.max_abs : (o.stats.max_abs > 0 ? 1e9 : 0);
        most = std::max({most, nmse, abs});
    }
    return most;
}

// Runs every case whose op starts with one of `prefixes`; each must pass,
// and sit within `budget` of its tolerance (the embedding backward excepted:
// its CPU reference rounds once per token, the GPU's sums differ in order).
// Answers which attention the backend ran (kernels/cuda/cuda_backend.h).
inline std::string run_cases(const std::vector<st::Case>& all, const std::vector<std::string>& prefixes,
                             double budget = 0.25) {
    tune::kernels::CpuBackend reference;
    auto cuda = tune::kernels::make_cuda_backend(0);
    int ran = 0;
    for (const auto& c : all) {
        const bool wanted =
            std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return c.op.rfind(p, 0) == 0; });
        if (!wanted) continue;
        ++ran;
        const st::CaseResult r = st::run_case(c, reference, *cuda, kSeed);
        const double m = margin(r);
        std::printf("margin %-28s %-10s %-40s %8.4f %s\n", c.op.c_str(), c.dtype.c_str(), c.shape.c_str(), m,
                    std::string(st::status_name(r.status)).c_str());
        INFO(c.op << " " << c.dtype << " " << c.shape << ": " << r.message << " margin " << m);
        CHECK(r.status == st::Status::pass);
        if (c.op != "embedding_backward") CHECK(m <= budget);
    }
    CHECK(ran > 0);
    CHECK(cuda->live_bytes() == 0);
    return tune::kernels::cuda_attention_path(*cuda);
}

}  // namespace tune_emu_test

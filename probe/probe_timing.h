// What every probe shares: timing an op as Google Benchmark does (one untimed
// call, then calls until a minimum time has passed), zero-filled backend
// scratch buffers, and the backend dtype of a probe's dtype.
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/backend.h"
#include "search/probed_rates.h"

namespace tune::probe {

// Seconds per call of `op`: one untimed call, then calls until min_seconds
// passed; `spent` (optional) receives the whole time, untimed call included.
double seconds_per_call(kernels::Backend& backend, const std::function<void()>& op, double min_seconds,
                        double* spent);

kernels::DType dtype_of(ProbeDtype d);

// A backend buffer freed on scope exit, zero-filled (probes time arithmetic, not values).
class Scratch {
public:
    Scratch(kernels::Backend& b, std::uint64_t bytes);
    ~Scratch();
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

    kernels::Backend& backend;
    void* ptr = nullptr;

private:
    std::uint64_t bytes_;
};

}  // namespace tune::probe

// Builds a case's host tensors from a seed: unit normals stored in the
// tensor's dtype (so both backends start from identical bits), token ids,
// zeros, and given values. Each add returns the tensor's index, which the
// case's run function uses to find its device copy.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/selftest/selftest.h"

namespace tune::kernels::selftest {

class CaseBuilder {
public:
    explicit CaseBuilder(std::uint64_t seed) : gen_(seed) {}

    // Inputs.
    std::size_t normal(const std::string& name, DType dtype, std::int64_t n, float scale = 1.0f);
    std::size_t uniform(const std::string& name, DType dtype, std::int64_t n, float lo, float hi);
    std::size_t tokens(const std::string& name, std::int64_t n, std::int64_t vocab);
    std::size_t values(const std::string& name, DType dtype, const std::vector<float>& v);
    std::size_t bytes(const std::string& name, std::int64_t n);  // u8, random

    // Outputs (compared after the op): start as random normals or zeros.
    std::size_t normal_output(const std::string& name, DType dtype, std::int64_t n, OpClass judged_as,
                              float scale = 1.0f);
    std::size_t zero_output(const std::string& name, DType dtype, std::int64_t n, OpClass judged_as);

    // Marks an input as also compared afterwards (updated in place).
    void mark_output(std::size_t index, OpClass judged_as);

    // Element i of tensor `index`, set after generation (e.g. an injected inf).
    void set(std::size_t index, std::int64_t i, float v);

    CaseData build(std::function<void(Backend&, DeviceTensors&)> run);

private:
    std::size_t add(HostTensor t);

    std::mt19937_64 gen_;
    std::vector<HostTensor> tensors_;
};

}  // namespace tune::kernels::selftest

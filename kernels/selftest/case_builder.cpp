// Host tensor generation for self-test cases.
#include "kernels/selftest/case_builder.h"

#include <cstring>

#include "kernels/math/half.h"

namespace tune::kernels::selftest {

namespace {

void put(HostTensor& t, std::int64_t i, float v) {
    unsigned char* at = t.bytes.data() + static_cast<std::size_t>(i) * dtype_bytes(t.dtype);
    switch (t.dtype) {
        case DType::bf16: {
            const auto h = math::to_bf16(v);
            std::memcpy(at, &h, 2);
            break;
        }
        case DType::f16: {
            const auto h = math::to_fp16(v);
            std::memcpy(at, &h, 2);
            break;
        }
        default:
            std::memcpy(at, &v, 4);
            break;
    }
}

HostTensor blank(const std::string& name, DType dtype, std::int64_t n) {
    HostTensor t;
    t.name = name;
    t.dtype = dtype;
    t.bytes.assign(static_cast<std::size_t>(n) * dtype_bytes(dtype), 0);
    return t;
}

}  // namespace

std::size_t CaseBuilder::add(HostTensor t) {
    tensors_.push_back(std::move(t));
    return tensors_.size() - 1;
}

std::size_t CaseBuilder::normal(const std::string& name, DType dtype, std::int64_t n, float scale) {
    HostTensor t = blank(name, dtype, n);
    std::normal_distribution<float> dist(0.0f, scale);
    for (std::int64_t i = 0; i < n; ++i) put(t, i, dist(gen_));
    return add(std::move(t));
}

std::size_t CaseBuilder::uniform(const std::string& name, DType dtype, std::int64_t n, float lo, float hi) {
    HostTensor t = blank(name, dtype, n);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (std::int64_t i = 0; i < n; ++i) put(t, i, dist(gen_));
    return add(std::move(t));
}

std::size_t CaseBuilder::tokens(const std::string& name, std::int64_t n, std::int64_t vocab) {
    HostTensor t = blank(name, DType::i32, n);
    std::uniform_int_distribution<std::int32_t> dist(0, static_cast<std::int32_t>(vocab - 1));
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int32_t v = dist(gen_);
        std::memcpy(t.bytes.data() + 4 * i, &v, 4);
    }
    return add(std::move(t));
}

std::size_t CaseBuilder::values(const std::string& name, DType dtype, const std::vector<float>& v) {
    HostTensor t = blank(name, dtype, static_cast<std::int64_t>(v.size()));
    for (std::size_t i = 0; i < v.size(); ++i) put(t, static_cast<std::int64_t>(i), v[i]);
    return add(std::move(t));
}

std::size_t CaseBuilder::bytes(const std::string& name, std::int64_t n) {
    HostTensor t = blank(name, DType::u8, n);
    std::uniform_int_distribution<int> dist(0, 255);
    for (auto& b : t.bytes) b = static_cast<unsigned char>(dist(gen_));
    return add(std::move(t));
}

std::size_t CaseBuilder::normal_output(const std::string& name, DType dtype, std::int64_t n, OpClass judged_as,
                                       float scale) {
    const std::size_t i = normal(name, dtype, n, scale);
    mark_output(i, judged_as);
    return i;
}

std::size_t CaseBuilder::zero_output(const std::string& name, DType dtype, std::int64_t n, OpClass judged_as) {
    const std::size_t i = add(blank(name, dtype, n));
    mark_output(i, judged_as);
    return i;
}

void CaseBuilder::mark_output(std::size_t index, OpClass judged_as) {
    tensors_.at(index).output = true;
    tensors_.at(index).op_class = judged_as;
}

void CaseBuilder::set(std::size_t index, std::int64_t i, float v) {
    HostTensor& t = tensors_.at(index);
    if (t.dtype == DType::i32) {
        const auto x = static_cast<std::int32_t>(v);
        std::memcpy(t.bytes.data() + 4 * i, &x, 4);
        return;
    }
    put(t, i, v);
}

CaseData CaseBuilder::build(std::function<void(Backend&, DeviceTensors&)> run) {
    return CaseData{std::move(tensors_), std::move(run)};
}

}  // namespace tune::kernels::selftest

#include "harness/qlora_base.h"

#include "kernels/math/nf4.h"

namespace tune::harness {

namespace {

using kernels::DType;

std::uint64_t bytes_of(std::int64_t elements, DType dt) {
    return static_cast<std::uint64_t>(elements) * kernels::dtype_bytes(dt);
}

// Host values in dt (fp32 or 16-bit bits) at dst.
void upload_values(kernels::Backend& backend, void* dst, const std::vector<float>& values, DType dt) {
    if (dt == DType::f32) {
        backend.copy_to_device(dst, values.data(), values.size() * 4);
        return;
    }
    const std::vector<std::uint16_t> rounded = round_16(values, dt);
    backend.copy_to_device(dst, rounded.data(), rounded.size() * 2);
}

}  // namespace

QuantizedBase::QuantizedBase(kernels::Backend& backend, Allocator& memory, const ParamLayout& layout, DType dtype)
    : backend_(backend), layout_(layout), dt_(dtype) {
    const std::int64_t n = layout.layer.padded, h = layout.at(LayerTensor::attn_norm).numel();
    for (std::int64_t i = 0; i < layout.layers; ++i) {
        nf4_.push_back(memory.zeros(Component::params, static_cast<std::uint64_t>(math::nf4_sizes(n).bytes)));
        norms_.push_back(memory.zeros(Component::params, bytes_of(2 * h, dtype)));
        layers_.push_back({nf4_.back().get(), norms_.back().get(), n});
    }
    outer_ = memory.zeros(Component::params, bytes_of(layout.outer.padded, dtype));
}

void QuantizedBase::upload(const HostParams& host) {
    const std::int64_t n = layout_.layer.padded;
    // fp32 staging and the first-level absmax, outside the tagged allocator:
    // init-time only, freed before the first step (§9).
    const std::uint64_t staging = bytes_of(n, DType::f32) + bytes_of(n / math::kNf4Block, DType::f32);
    auto* x = static_cast<float*>(backend_.allocate(staging));
    try {
        for (std::size_t i = 0; i < layers_.size(); ++i) {
            backend_.copy_to_device(x, host[i].data(), bytes_of(n, DType::f32));
            backend_.nf4_quantize(nf4_[i].get(), x, n, x + n);
            std::vector<float> norms;
            for (LayerTensor t : {LayerTensor::attn_norm, LayerTensor::mlp_norm}) {
                const TensorView& v = layout_.at(t);
                norms.insert(norms.end(), host[i].begin() + v.offset, host[i].begin() + v.offset + v.numel());
            }
            upload_values(backend_, norms_[i].get(), norms, dt_);
        }
    } catch (...) {
        backend_.deallocate(x, staging);
        throw;
    }
    backend_.deallocate(x, staging);
    upload_values(backend_, outer_.get(), host[layout_.outer_index()], dt_);
}

}  // namespace tune::harness

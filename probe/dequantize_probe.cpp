#include "probe/dequantize_probe.h"

#include <algorithm>
#include <vector>

#include "estimate/flat_layout.h"
#include "kernels/math/nf4.h"

namespace tune::probe {
namespace {

// The layer's matrices in the trainer's order (q, k, v, o, gate, up, down), in
// elements; the probe lays them out in slots of whole 256 elements, as the
// trainer's flat layer buffer does (estimate/flat_layout.h). q and o are taken as
// (hidden, hidden), as the optimizer probe's tensors are: a model whose heads
// times head_dim is not its hidden size (Mistral-Nemo) is probed a little off.
std::vector<std::int64_t> matrix_sizes(const DequantizeRate& r) {
    const std::int64_t h = r.hidden, kv = r.kv_dim, f = r.ffn;
    return {h * h, kv * h, kv * h, h * h, f * h, f * h, h * f};
}

}  // namespace

double probe_dequantize(kernels::Backend& backend, const DequantizeRate& rate, const ProbeSettings& s, double* spent) {
    const std::vector<std::int64_t> sizes = matrix_sizes(rate);
    std::vector<std::int64_t> offsets;  // each matrix's slot
    std::int64_t n = 0, largest = 0;
    for (std::int64_t size : sizes) {
        offsets.push_back(n);
        n += static_cast<std::int64_t>(round_up(static_cast<std::uint64_t>(size), 256));
        largest = std::max(largest, size);
    }
    const kernels::DType dtype = kernel_dtype(rate.dtype);
    // Weights of a trained model's scale, quantized as QuantizedBase::upload does.
    Scratch weights(backend, static_cast<std::uint64_t>(n) * 4);
    Scratch absmax(backend, static_cast<std::uint64_t>(n / math::kNf4Block) * 4);
    Scratch nf4(backend, static_cast<std::uint64_t>(math::nf4_sizes(n).bytes));
    Scratch out(backend, static_cast<std::uint64_t>(largest) * kernels::dtype_bytes(dtype));
    backend.neftune_noise(weights.ptr, n, 0.02f, 11, kernels::DType::f32);
    backend.nf4_quantize(nf4.ptr, static_cast<const float*>(weights.ptr), n, static_cast<float*>(absmax.ptr));
    const auto layer = [&] {
        for (std::size_t i = 0; i < sizes.size(); ++i)
            backend.nf4_dequantize(out.ptr, dtype, nf4.ptr, n, offsets[i], sizes[i]);
    };
    return seconds_per_call(backend, layer, s, spent);
}

}  // namespace tune::probe

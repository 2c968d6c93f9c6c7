#include "probe/bucket_probe.h"

#include <algorithm>

namespace tune::probe {

double probe_bucket(kernels::Backend& backend, const BucketRate& rate, const ProbeSettings& s, double* spent) {
    const kernels::DType dtype = kernel_dtype(rate.dtype);
    const std::uint64_t element = probe_dtype_bytes(rate.dtype);
    const std::uint64_t elements = rate.bytes / element, shard = elements / std::max<std::uint32_t>(rate.ranks, 1);
    Scratch bucket(backend, elements * element);
    Scratch grads(backend, shard * element, rate.host ? kernels::ScratchPlace::host : kernels::ScratchPlace::device);
    // Gradients of a step's scale: the add converts each 16-bit value, whatever it holds.
    backend.neftune_noise(grads.ptr, static_cast<std::int64_t>(shard), 1e-3f, 12, dtype);
    const auto work = [&] { backend.add(grads.ptr, grads.ptr, bucket.ptr, static_cast<std::int64_t>(shard), dtype); };
    return seconds_per_call(backend, work, s, spent);
}

}  // namespace tune::probe

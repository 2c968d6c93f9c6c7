#include "train/qlora_base.h"

#include <algorithm>
#include <stdexcept>

#include "kernels/math/nf4.h"

namespace tune::train {

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

// Elements [begin, begin + count) of part `from` (of `total` elements, each
// `size` bytes) to `to`, clipped at the end of the part: a shard's tail past
// the quantized weights stays zero.
void copy_part(kernels::Backend& backend, void* to, const void* from, std::int64_t begin, std::int64_t count,
               std::int64_t total, std::uint64_t size) {
    const std::int64_t n = std::min(count, total - begin);
    if (n > 0)
        backend.copy(to, static_cast<const unsigned char*>(from) + static_cast<std::uint64_t>(begin) * size,
                     static_cast<std::uint64_t>(n) * size);
}

}  // namespace

QuantizedBase::QuantizedBase(kernels::Backend& backend, Allocator& memory, const ParamLayout& layout, DType dtype,
                             const ZeroPlan& zero, Comm& comm, HostPlacement host)
    : backend_(backend),
      storage_backend_(host.holds(Component::params) ? *host.backend : backend),
      memory_(memory),
      layout_(layout),
      dt_(dtype),
      zero_(zero),
      comm_(comm) {
    if (host.holds(Component::params) && (host.memory == nullptr || host.backend == nullptr))
        throw std::invalid_argument("QuantizedBase: offload without host memory and a host backend");
    Allocator& storage = host.holds(Component::params) ? *host.memory : memory;
    const std::int64_t vectors = layout.vector_numel();
    kept_ = sharded() ? math::nf4_shard(layout.layer.padded, comm.world_size()).shard : layout.layer.padded;
    for (std::int64_t i = 0; i < layout.layers; ++i) {
        nf4_.push_back(storage.zeros(Component::params, static_cast<std::uint64_t>(math::nf4_sizes(kept_).bytes)));
        vectors_.push_back(storage.zeros(Component::params, bytes_of(vectors, dtype)));
        layers_.push_back({nf4_.back().get(), vectors_.back().get(), kept_});
    }
    const std::int64_t outer = sharded() ? layout.outer.shard : layout.outer.padded;
    outer_ = storage.zeros(Component::params, bytes_of(outer, dtype));
}

// This rank's shard of a layer quantized whole (NF4 of the padded layer) at `whole`.
void QuantizedBase::upload_layer_shard(std::size_t i, const void* whole) {
    const std::int64_t n = layout_.layer.padded, r = comm_.rank();
    const math::Nf4Sizes all = math::nf4_sizes(n), mine = math::nf4_sizes(kept_);
    const math::Nf4Parts from = math::nf4_parts(const_cast<void*>(whole), n);
    const math::Nf4Parts to = math::nf4_parts(nf4_[i].get(), kept_);
    copy_part(backend_, to.packed, from.packed, r * mine.packed, mine.packed, all.packed, 1);
    copy_part(backend_, to.absmax, from.absmax, r * mine.absmax, mine.absmax, all.absmax, 1);
    copy_part(backend_, to.scales, from.scales, r * mine.scales, mine.scales, all.scales, 4);
    backend_.copy(to.offset, from.offset, 4);
}

void QuantizedBase::upload(const HostParams& host) {
    const std::int64_t n = layout_.layer.padded;
    // fp32 staging, the first-level absmax and (stage 3) the whole layer's
    // NF4 before it is cut into shards, outside the tagged allocator:
    // init-time only, freed before the first step (§9).
    const std::uint64_t quantized = sharded() ? static_cast<std::uint64_t>(math::nf4_sizes(n).bytes) : 0;
    const std::uint64_t staging = bytes_of(n, DType::f32) + bytes_of(n / math::kNf4Block, DType::f32) + quantized;
    auto* x = static_cast<float*>(backend_.allocate(staging));
    void* whole = x + n + n / math::kNf4Block;
    try {
        for (std::size_t i = 0; i < layers_.size(); ++i) {
            backend_.copy_to_device(x, host[i].data(), bytes_of(n, DType::f32));
            if (sharded()) {
                backend_.nf4_quantize(whole, x, n, x + n);
                upload_layer_shard(i, whole);
            } else {
                backend_.nf4_quantize(nf4_[i].get(), x, n, x + n);
            }
            std::vector<float> vectors;
            for (const TensorView& v : layout_.layer.tensors)
                if (!v.matrix())
                    vectors.insert(vectors.end(), host[i].begin() + v.offset, host[i].begin() + v.offset + v.numel());
            upload_values(storage_backend_, vectors_[i].get(), vectors, dt_);
        }
    } catch (...) {
        backend_.deallocate(x, staging);
        throw;
    }
    backend_.deallocate(x, staging);
    const std::vector<float>& outer = host[layout_.outer_index()];
    if (!sharded()) {
        upload_values(storage_backend_, outer_.get(), outer, dt_);
        return;
    }
    const auto first = outer.begin() + comm_.rank() * layout_.outer.shard;
    upload_values(storage_backend_, outer_.get(), std::vector<float>(first, first + layout_.outer.shard), dt_);
}

QuantizedBase::Gathered QuantizedBase::gather_layer(std::size_t i) {
    const std::int64_t ranks = comm_.world_size(), r = comm_.rank();
    const std::int64_t padded = ranks * kept_;
    const math::Nf4Sizes mine = math::nf4_sizes(kept_);
    Gathered g;
    g.storage = memory_.allocate(Component::comm, static_cast<std::uint64_t>(math::nf4_sizes(padded).bytes));
    const math::Nf4Parts to = math::nf4_parts(g.storage.get(), padded);
    const math::Nf4Parts from = math::nf4_parts(nf4_[i].get(), kept_);
    // Each part's shards lie side by side in the gathered layout (whole absmax groups per rank).
    backend_.copy(to.packed + r * mine.packed, from.packed, static_cast<std::uint64_t>(mine.packed));
    backend_.copy(to.absmax + r * mine.absmax, from.absmax, static_cast<std::uint64_t>(mine.absmax));
    backend_.copy(to.scales + r * mine.scales, from.scales, 4 * static_cast<std::uint64_t>(mine.scales));
    backend_.copy(to.offset, from.offset, 4);
    comm_.all_gather(to.packed, ranks * mine.packed, DType::u8);
    comm_.all_gather(to.absmax, ranks * mine.absmax, DType::u8);
    comm_.all_gather(to.scales, ranks * mine.scales, DType::f32);
    g.view = {g.storage.get(), vectors_[i].get(), padded};
    return g;
}

Buffer QuantizedBase::gather_outer() { return gather_flat(memory_, comm_, outer_.get(), layout_.outer, dt_); }

}  // namespace tune::train

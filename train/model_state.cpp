#include "train/model_state.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/math/half.h"

namespace tune::train {

namespace {

using kernels::DType;

std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Uniform in (0, 1) from draw `i` of stream `seed`.
double uniform01(std::uint64_t seed, std::uint64_t i) {
    return (static_cast<double>(mix(seed ^ mix(i + 0x632be59bd9b4e019ull)) >> 11) + 0.5) / 9007199254740992.0;
}

// Box-Muller on two counter draws: the same numbers on every platform.
double normal(std::uint64_t seed, std::uint64_t i) {
    const double u1 = uniform01(seed, 2 * i), u2 = uniform01(seed, 2 * i + 1);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// The counter stream of buffer i's weights.
std::uint64_t random_stream(std::uint64_t seed, std::size_t i) { return mix(seed + 0x9e3779b97f4a7c15ull * (i + 1)); }

}  // namespace

std::vector<std::uint16_t> round_16(const std::vector<float>& values, DType dt) {
    std::vector<std::uint16_t> out(values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
        out[i] = dt == DType::bf16 ? math::to_bf16(values[i]).bits : math::to_fp16(values[i]).bits;
    return out;
}

std::vector<float> widen_16(const std::vector<std::uint16_t>& raw, DType dt) {
    std::vector<float> out(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i)
        out[i] = dt == DType::bf16 ? math::to_float(math::bf16{raw[i]}) : math::to_float(math::fp16{raw[i]});
    return out;
}

PrecisionPlan precision_plan(Precision p) {
    switch (p) {
        case Precision::fp32:
            return {DType::f32, DType::f32, false, false};
        case Precision::bf16_mixed:
            return {DType::bf16, DType::f32, true, false};
        case Precision::fp16_mixed:
            return {DType::f16, DType::f32, true, true};
        case Precision::bf16:
            return {DType::bf16, DType::bf16, false, false};
    }
    return {};
}

ModelState::ModelState(kernels::Backend& backend, Allocator& memory, const ParamLayout& layout, PrecisionPlan plan,
                       bool with_grads, ZeroPlan zero, Comm& comm, HostPlacement host)
    : backend_(backend), layout_(layout), plan_(plan), zero_(zero), comm_(comm), host_(host) {
    if (host.plan.any() && (host.memory == nullptr || host.backend == nullptr))
        throw std::invalid_argument("ModelState: offload without host memory and a host backend");
    const std::uint64_t wb = kernels::dtype_bytes(plan.weights);
    auto count = [](std::int64_t n) { return static_cast<std::uint64_t>(n); };
    auto zeros = [&](Component tag, std::uint64_t bytes) {
        return (host.holds(tag) ? *host.memory : memory).zeros(tag, bytes);
    };
    for (std::size_t i = 0; i < layout.buffers(); ++i) {
        params_.push_back(zeros(Component::params, count(weights_length(i)) * wb));
        if (plan.master) master_.push_back(zeros(Component::master, count(master_length(i)) * 4));
        if (with_grads) grads_.push_back(zeros(Component::grads, count(grads_length(i)) * wb));
    }
}

std::int64_t ModelState::weights_length(std::size_t buffer) const {
    return zero_.shards_parameters ? layout_.flat(buffer).shard : layout_.flat(buffer).padded;
}

std::int64_t ModelState::master_length(std::size_t buffer) const {
    return zero_.shards_master_weights ? layout_.flat(buffer).shard : layout_.flat(buffer).padded;
}

std::int64_t ModelState::grads_length(std::size_t buffer) const {
    return zero_.shards_gradients ? layout_.flat(buffer).shard : layout_.flat(buffer).padded;
}

std::int64_t ModelState::owned_begin(std::size_t buffer) const {
    return zero_.updates_own_shard_only() ? comm_.rank() * layout_.flat(buffer).shard : 0;
}

std::int64_t ModelState::owned_length(std::size_t buffer) const { return master_length(buffer); }

namespace {

// Element e of a buffer holding `length` elements from the whole buffer's element `first`.
void* element_in(const Buffer& b, std::int64_t e, std::int64_t first, std::int64_t length, DType dt) {
    if (e < first || e > first + length)
        throw std::logic_error("element outside the part of the buffer this rank holds");
    return b.at(static_cast<std::uint64_t>(e - first) * kernels::dtype_bytes(dt));
}

}  // namespace

std::int64_t ModelState::first_held(std::size_t buffer, std::int64_t n) const {
    return n == layout_.flat(buffer).padded ? 0 : owned_begin(buffer);
}

void* ModelState::weight_at(std::size_t buffer, std::int64_t e) const {
    const std::int64_t n = weights_length(buffer);
    return element_in(params_[buffer], e, first_held(buffer, n), n, plan_.weights);
}

void* ModelState::master_at(std::size_t buffer, std::int64_t e) const {
    const std::int64_t n = master_length(buffer);
    return element_in(master_[buffer], e, first_held(buffer, n), n, DType::f32);
}

void* ModelState::grad_at(std::size_t buffer, std::int64_t e) const {
    const std::int64_t n = grads_length(buffer);
    return element_in(grads_[buffer], e, first_held(buffer, n), n, plan_.weights);
}

void* ModelState::weight_tensor(std::size_t buffer, std::size_t t) const {
    return params_[buffer].at(static_cast<std::uint64_t>(layout_.flat(buffer).tensors[t].offset) *
                              kernels::dtype_bytes(plan_.weights));
}

void* ModelState::grad_tensor(std::size_t buffer, std::size_t t) const {
    return grads_[buffer].at(static_cast<std::uint64_t>(layout_.flat(buffer).tensors[t].offset) *
                             kernels::dtype_bytes(plan_.weights));
}

void ModelState::forget_grads() {
    for (std::size_t i = 0; i < grads_.size(); ++i) {
        if (grads_length(i) != layout_.flat(i).padded)
            throw std::logic_error("forget_grads: a sharded gradient buffer is added to, not written");
        unwritten_.mark(i, layout_.flat(i).tensors.size());
    }
}

GradTarget ModelState::grad_target(std::size_t buffer, std::size_t t) {
    const bool fresh = unwritten_.take(buffer, t);
    return {grad_tensor(buffer, t), fresh};
}

void* ModelState::zeroed_grad(std::size_t buffer, std::size_t t) {
    if (unwritten_.take(buffer, t))
        zero_tensor(backend_of(Component::grads), grads_[buffer].get(), layout_.flat(buffer), t, plan_.weights);
    return grad_tensor(buffer, t);
}

void ModelState::settle_grads() {
    for (std::size_t i = 0; i < grads_.size(); ++i)
        unwritten_.zero_rest(backend_of(Component::grads), i, grads_[i].get(), layout_.flat(i), plan_.weights);
}

namespace {

// values[first, first + n) in dtype dt, on the device at dst.
void upload_range(kernels::Backend& backend, void* dst, const std::vector<float>& values, std::int64_t first,
                  std::int64_t n, DType dt) {
    const auto begin = values.begin() + first;
    const std::vector<float> part(begin, begin + n);
    if (dt == DType::f32) {
        backend.copy_to_device(dst, part.data(), part.size() * 4);
    } else {
        const std::vector<std::uint16_t> rounded = round_16(part, dt);
        backend.copy_to_device(dst, rounded.data(), rounded.size() * 2);
    }
}

}  // namespace

namespace {

// random_init's values of buffer `f` at whole-buffer indices [first, first + out.size()).
// Each value is its own counter draw, so the threads' split leaves them unchanged;
// one thread drew about 12 M values per second, and a 333M-parameter model took
// 36 s to start on an H100's host before its first step.
// With `source`, the draw of element j is the whole model's at the element the shard holds there
// (TensorSource), and a row past the whole tensor's (the vocabulary's padding) is zero.
void random_values(const FlatLayout& f, const std::vector<TensorSource>* source, std::uint64_t stream, double stddev,
                   std::int64_t first, std::vector<float>& out) {
    std::fill(out.begin(), out.end(), 0.0f);
    const std::int64_t last = first + static_cast<std::int64_t>(out.size());
    for (std::size_t k = 0; k < f.tensors.size(); ++k) {
        const TensorView& t = f.tensors[k];
        const std::int64_t lo = std::max(first, t.offset), hi = std::min(last, t.offset + t.numel());
        const bool matrix = t.matrix();
        const float vector_value = t.initial_vector_value();
        const TensorSource s = source != nullptr ? (*source)[k] : TensorSource{t.offset, t.rows, t.cols};
#pragma omp parallel for schedule(static)
        for (std::int64_t j = lo; j < hi; ++j) {
            const std::int64_t row = s.row_begin + (j - t.offset) / t.cols, col = s.col_begin + (j - t.offset) % t.cols;
            const auto draw = static_cast<std::uint64_t>(s.offset + row * s.cols + col);
            out[static_cast<std::size_t>(j - first)] = !matrix ? vector_value
                                                       : row < s.rows
                                                           ? static_cast<float>(stddev * normal(stream, draw))
                                                           : 0.0f;
        }
    }
}

// Where one range of a buffer's values goes: the weights, and the fp32 master
// weights where they hold the same range (one draw serves both).
struct Destination {
    void* dst;
    DType dtype;
    kernels::Backend* backend;  // which copies to it: the device's, or the host's under offload
};

// The n elements this rank holds from `first` on, drawn and uploaded chunk by chunk.
void upload_random_range(const std::vector<Destination>& to, const FlatLayout& f,
                         const std::vector<TensorSource>* source, std::uint64_t stream, double stddev,
                         std::int64_t first, std::int64_t n) {
    constexpr std::int64_t kChunk = 1 << 22;  // elements: 16 MiB of fp32
    std::vector<float> values;
    for (std::int64_t done = 0; done < n; done += kChunk) {
        values.resize(static_cast<std::size_t>(std::min(kChunk, n - done)));
        random_values(f, source, stream, stddev, first + done, values);
        for (const Destination& d : to)
            upload_range(
                *d.backend,
                static_cast<unsigned char*>(d.dst) + done * static_cast<std::int64_t>(kernels::dtype_bytes(d.dtype)),
                values, 0, static_cast<std::int64_t>(values.size()), d.dtype);
    }
}

}  // namespace

void ModelState::upload_random(std::uint64_t seed, const LayoutSource* source, double stddev) {
    for (std::size_t i = 0; i < layout_.buffers(); ++i) {
        const std::vector<TensorSource>* from = source != nullptr ? &(*source)[i] : nullptr;
        const std::uint64_t stream = random_stream(seed, layout_.whole_index(i));  // a stage's: the whole's
        const std::int64_t n = weights_length(i), first = first_held(i, n);
        std::vector<Destination> to{{params_[i].get(), plan_.weights, &backend_of(Component::params)}};
        if (!master_.empty()) {
            const std::int64_t master_n = master_length(i), master_first = first_held(i, master_n);
            const Destination master{master_[i].get(), DType::f32, &backend_of(Component::master)};
            if (master_n == n && master_first == first)
                to.push_back(master);
            else
                upload_random_range({master}, layout_.flat(i), from, stream, stddev, master_first, master_n);
        }
        upload_random_range(to, layout_.flat(i), from, stream, stddev, first, n);
    }
}

void ModelState::upload(const HostParams& host) {
    for (std::size_t i = 0; i < layout_.buffers(); ++i) {
        const std::int64_t padded = layout_.flat(i).padded;
        if (static_cast<std::int64_t>(host[i].size()) != padded)
            throw std::invalid_argument("upload: a host buffer does not have the layout's padded length");
        if (!master_.empty()) {
            const std::int64_t n = master_length(i);
            upload_range(backend_of(Component::master), master_[i].get(), host[i], first_held(i, n), n, DType::f32);
        }
        const std::int64_t n = weights_length(i);
        upload_range(backend_of(Component::params), params_[i].get(), host[i], first_held(i, n), n, plan_.weights);
    }
}

namespace {

std::vector<float> to_host_f32(kernels::Backend& backend, const void* src, DType dt, std::int64_t n) {
    std::vector<float> out(static_cast<std::size_t>(n));
    if (dt == DType::f32) {
        backend.copy_to_host(out.data(), src, out.size() * 4);
    } else {
        std::vector<std::uint16_t> raw(out.size());
        backend.copy_to_host(raw.data(), src, raw.size() * 2);
        out = widen_16(raw, dt);
    }
    return out;
}

}  // namespace

std::vector<float> ModelState::whole_on_host(std::size_t buffer, const void* src, Component c, DType dt, bool sharded) {
    const FlatLayout& f = layout_.flat(buffer);
    if (!sharded || comm_.world_size() == 1) return to_host_f32(backend_of(c), src, dt, f.padded);
    // Gather the shards on the device, outside the tagged allocator: this is
    // inspection after the fact, not part of a step's memory. copy() takes a
    // host shard too (kernels/backend.h); the collective runs on the device.
    const std::uint64_t bytes = static_cast<std::uint64_t>(f.padded) * kernels::dtype_bytes(dt);
    void* whole = backend_.allocate(bytes);
    try {
        backend_.copy(static_cast<unsigned char*>(whole) +
                          static_cast<std::uint64_t>(comm_.rank() * f.shard) * kernels::dtype_bytes(dt),
                      src, static_cast<std::uint64_t>(f.shard) * kernels::dtype_bytes(dt));
        comm_.all_gather(whole, f.padded, dt);
        std::vector<float> out = to_host_f32(backend_, whole, dt, f.padded);
        backend_.deallocate(whole, bytes);
        return out;
    } catch (...) {
        backend_.deallocate(whole, bytes);
        throw;
    }
}

HostParams ModelState::download_weights() {
    HostParams out;
    for (std::size_t i = 0; i < layout_.buffers(); ++i) {
        if (!master_.empty())
            out.push_back(
                whole_on_host(i, master_[i].get(), Component::master, DType::f32, zero_.shards_master_weights));
        else
            out.push_back(
                whole_on_host(i, params_[i].get(), Component::params, plan_.weights, zero_.shards_parameters));
    }
    return out;
}

HostParams ModelState::download_grads() {
    HostParams out;
    for (std::size_t i = 0; i < grads_.size(); ++i) {
        // Stage 1 keeps the whole buffer, but only the rank's shard holds the averaged gradient.
        const void* own = zero_.updates_own_shard_only() ? grad_at(i, owned_begin(i)) : grads_[i].get();
        out.push_back(whole_on_host(i, own, Component::grads, plan_.weights, zero_.updates_own_shard_only()));
    }
    return out;
}

Buffer gather_flat(Allocator& memory, Comm& comm, const void* shard, const FlatLayout& f, DType dt) {
    const std::uint64_t b = kernels::dtype_bytes(dt);
    Buffer whole = memory.allocate(Component::comm, static_cast<std::uint64_t>(f.padded) * b);
    memory.backend().copy(whole.at(static_cast<std::uint64_t>(comm.rank() * f.shard) * b), shard,
                          static_cast<std::uint64_t>(f.shard) * b);
    comm.all_gather(whole.get(), f.padded, dt);
    return whole;
}

HostParams random_init(const ParamLayout& layout, std::uint64_t seed, double stddev, const LayoutSource* source) {
    HostParams host;
    for (std::size_t i = 0; i < layout.buffers(); ++i) {
        std::vector<float> buf(static_cast<std::size_t>(layout.flat(i).padded));
        random_values(layout.flat(i), source != nullptr ? &(*source)[i] : nullptr,
                      random_stream(seed, layout.whole_index(i)), stddev, 0, buf);
        host.push_back(std::move(buf));
    }
    return host;
}

}  // namespace tune::train

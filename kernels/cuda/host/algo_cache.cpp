// GemmKey construction, hashing and printing.
#include "kernels/cuda/host/algo_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

namespace tune::kernels::cuda {

std::uint16_t pointer_alignment(const void* p) {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    std::uint16_t align = 256;
    while (align > 1 && address % align != 0) align = static_cast<std::uint16_t>(align / 2);
    return align;
}

std::uint16_t batch_alignment(const void* p, std::int64_t stride, DType t, bool batched) {
    const std::uint16_t base = pointer_alignment(p);
    if (!batched || stride == 0) return base;
    const std::uint64_t step = static_cast<std::uint64_t>(stride < 0 ? -stride : stride) * dtype_bytes(t);
    std::uint16_t align = base;
    while (align > 1 && step % align != 0) align = static_cast<std::uint16_t>(align / 2);
    return align;
}

GemmKey make_gemm_key(const GemmArgs& a, std::uint64_t workspace_cap) {
    GemmKey key;
    key.m = a.m, key.n = a.n, key.k = a.k;
    key.lda = a.lda, key.ldb = a.ldb, key.ldc = a.ldc;
    // A batch of one never steps, so its strides cannot matter.
    const bool batched = a.batch > 1;
    key.stride_a = batched ? a.stride_a : 0;
    key.stride_b = batched ? a.stride_b : 0;
    key.stride_c = batched ? a.stride_c : 0;
    key.batch = a.batch;
    key.trans_a = a.trans_a, key.trans_b = a.trans_b;
    key.a_dtype = a.a_dtype, key.b_dtype = a.b_dtype, key.c_dtype = a.c_dtype;
    key.align_a = batch_alignment(a.a, key.stride_a, a.a_dtype, batched);
    key.align_b = batch_alignment(a.b, key.stride_b, a.b_dtype, batched);
    // The heuristic is told one alignment for C and D: the smaller of the two where C is read from c_in.
    key.align_c = std::min(batch_alignment(a.c, key.stride_c, a.c_dtype, batched),
                           batch_alignment(c_source(a), key.stride_c, a.c_dtype, batched));
    key.workspace_cap = workspace_cap;
    return key;
}

namespace {

auto fields(const GemmKey& k) {
    return std::tie(k.m, k.n, k.k, k.lda, k.ldb, k.ldc, k.stride_a, k.stride_b, k.stride_c, k.batch, k.trans_a,
                    k.trans_b, k.a_dtype, k.b_dtype, k.c_dtype, k.align_a, k.align_b, k.align_c, k.workspace_cap);
}

}  // namespace

bool operator==(const GemmKey& a, const GemmKey& b) { return fields(a) == fields(b); }

std::size_t GemmKeyHash::operator()(const GemmKey& key) const {
    // FNV-1a style mixing of each field; collisions only cost a compare.
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&h](std::uint64_t v) {
        h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h *= 1099511628211ull;
    };
    for (std::int64_t v :
         {key.m, key.n, key.k, key.lda, key.ldb, key.ldc, key.stride_a, key.stride_b, key.stride_c, key.batch})
        mix(static_cast<std::uint64_t>(v));
    mix((key.trans_a ? 1u : 0u) | (key.trans_b ? 2u : 0u) | (static_cast<unsigned>(key.a_dtype) << 2) |
        (static_cast<unsigned>(key.b_dtype) << 5) | (static_cast<unsigned>(key.c_dtype) << 8));
    mix(static_cast<std::uint64_t>(key.align_a) | (static_cast<std::uint64_t>(key.align_b) << 16) |
        (static_cast<std::uint64_t>(key.align_c) << 32));
    mix(key.workspace_cap);
    return static_cast<std::size_t>(h);
}

std::string to_string(const GemmKey& k) {
    return fmt::format("m={} n={} k={} {}{} {}*{}->{} batch={} lda={} ldb={} ldc={} strides={}/{}/{} align={}/{}/{}",
                       k.m, k.n, k.k, k.trans_a ? 'T' : 'N', k.trans_b ? 'T' : 'N', dtype_name(k.a_dtype),
                       dtype_name(k.b_dtype), dtype_name(k.c_dtype), k.batch, k.lda, k.ldb, k.ldc, k.stride_a,
                       k.stride_b, k.stride_c, k.align_a, k.align_b, k.align_c);
}

}  // namespace tune::kernels::cuda

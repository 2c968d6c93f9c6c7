// Rates measured on this machine (probe/, `tune probe`), which the time model
// uses per op instead of nominal peaks times an efficiency: GEMMs at the
// model's own shapes and dtypes, attention forward and backward per shape,
// and the memory bandwidth the optimizer's updates stream at.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace tune {

struct GemmRate {
    std::int64_t m = 0, n = 0, k = 0;  // C (m, n) = A (m, k) B (k, n)
    std::uint32_t dtype_bytes = 4;     // 4: fp32, 2: 16-bit operands
    double flops_per_s = 0;
};

struct AttentionRate {
    std::int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
    std::uint32_t dtype_bytes = 4;
    bool fused = false;  // the implementation probed
    double forward_s = 0;
    double backward_s = 0;
};

// The collectives ZeRO uses, probed over MPI (CPU) or NCCL (GPU) at the sweep's world sizes.
enum class Collective : std::uint8_t { all_reduce, reduce_scatter, all_gather };

// nccl-tests' bus bandwidth: algbw = bytes / seconds (bytes: the buffer an
// all-reduce sums, the whole output of an all-gather, the whole input of a
// reduce-scatter), times what each rank must send per byte of it: 2(n-1)/n
// for an all-reduce, (n-1)/n for a reduce-scatter or all-gather. It compares
// with a link's rate, whatever the rank count.
double bus_bandwidth(Collective op, std::uint32_t ranks, double bytes, double seconds);
// The factor alone: 2(n-1)/n or (n-1)/n (0 for one rank).
double bus_factor(Collective op, std::uint32_t ranks);

struct CollectiveRate {
    Collective op = Collective::all_reduce;
    std::uint32_t ranks = 2;
    std::uint64_t bytes = 0;  // message size (see bus_bandwidth)
    double bus_bytes_per_s = 0;
};

struct ProbedRates {
    std::vector<GemmRate> gemm;
    std::vector<AttentionRate> attention;
    double memory_bytes_per_s = 0;  // streaming read + write (the optimizer's updates); 0: not probed
    std::vector<CollectiveRate> collectives;

    bool empty() const {
        return gemm.empty() && attention.empty() && memory_bytes_per_s <= 0 && collectives.empty();
    }
    // The bus bandwidth of `op` at this rank count, from the probed message size
    // nearest `bytes` (log scale); nullopt when none was probed at this rank count.
    std::optional<double> bus_bytes_per_s(Collective op, std::uint32_t ranks, double bytes) const;
    // The probed rate of this shape, else that of the probed shape of the same
    // dtype nearest in FLOPs (log scale); nullopt when no GEMM of the dtype was probed.
    std::optional<double> gemm_flops_per_s(std::int64_t m, std::int64_t n, std::int64_t k,
                                           std::uint32_t dtype_bytes) const;
    // Seconds of one attention forward and backward at this shape, scaled by
    // batch from the nearest probed one of the same kind; nullopt when none.
    std::optional<AttentionRate> attention_at(std::int64_t batch, std::int64_t seq, std::int64_t heads,
                                              std::int64_t head_dim, std::uint32_t dtype_bytes, bool fused) const;
};

}  // namespace tune

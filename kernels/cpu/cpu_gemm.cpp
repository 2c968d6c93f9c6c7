// GEMM on the CPU: OpenBLAS cblas_sgemm per batch matrix. 16-bit operands
// are widened into the fp32 workspace first (and a 16-bit C narrowed back).
#include <cblas.h>

#include <algorithm>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/typed.h"
#include "kernels/cpu/vectorize.h"
#include "kernels/op_checks.h"

namespace tune::kernels {

namespace {

// One operand as stored: batch matrices of (rows, cols) with leading dim ld.
struct Operand {
    const void* data;
    DType dtype;
    std::int64_t rows, cols, ld, stride, batch;

    // Distinct matrices in memory: a stride-0 operand is one matrix shared by the batch.
    std::int64_t copies() const { return stride == 0 ? 1 : batch; }
    std::uint64_t packed_floats() const {
        return dtype == DType::f32 ? 0 : static_cast<std::uint64_t>(copies() * rows * cols);
    }
};

Operand operand_a(const GemmArgs& g) {
    return {g.a, g.a_dtype, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.stride_a, g.batch};
}
Operand operand_b(const GemmArgs& g) {
    return {g.b, g.b_dtype, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.stride_b, g.batch};
}
Operand operand_c(const GemmArgs& g) { return {g.c, g.c_dtype, g.m, g.n, g.ldc, g.stride_c, g.batch}; }

// A view of an operand in fp32 that sgemm can read.
struct F32View {
    float* data;
    std::int64_t ld, stride;
};

template <class T>
void widen(const Operand& op, float* dst, int threads) {
    const auto* src = static_cast<const T*>(op.data);
    const std::int64_t rows = op.copies() * op.rows;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
        const T* in = src + (r / op.rows) * op.stride + (r % op.rows) * op.ld;
        cpu::load_run(in, op.cols, dst + r * op.cols);
    }
}

template <class T>
void narrow(const Operand& op, const float* src, int threads) {
    auto* dst = static_cast<T*>(const_cast<void*>(op.data));
    const std::int64_t rows = op.copies() * op.rows;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
        T* out = dst + (r / op.rows) * op.stride + (r % op.rows) * op.ld;
        cpu::store_run(out, op.cols, src + r * op.cols);
    }
}

// fp32 operands are used in place; others are widened into `scratch` (advanced past them), from
// `source`'s values (the operand's own, or C's from c_in).
F32View as_f32(const Operand& op, float*& scratch, const void* source, int threads) {
    if (op.dtype == DType::f32) return {static_cast<float*>(const_cast<void*>(op.data)), op.ld, op.stride};
    float* dst = scratch;
    scratch += op.packed_floats();
    Operand from = op;
    from.data = source;
    if (source != nullptr) cpu::with_float_type(op.dtype, [&](auto t) { widen<decltype(t)>(from, dst, threads); });
    return {dst, op.cols, op.stride == 0 ? 0 : op.rows * op.cols};
}

// An fp32 C's values from c_in, so sgemm can add to them in place (c_in has C's layout).
void copy_f32_c(const Operand& c, const void* c_in, int threads) {
    const std::int64_t rows = c.copies() * c.rows;
    auto* dst = static_cast<float*>(const_cast<void*>(c.data));
    const auto* src = static_cast<const float*>(c_in);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t at = (r / c.rows) * c.stride + (r % c.rows) * c.ld;
        std::copy_n(src + at, c.cols, dst + at);
    }
}

// Part of C one OpenMP thread computes with one single-threaded sgemm:
// rows [m0, m1), columns [n0, n1) of batch matrix `batch`.
struct Tile {
    std::int64_t batch, m0, m1, n0, n1;
};

// Rows of C one sgemm call computes at most. OpenBLAS (0.3.21, Skylake-X)
// packs a panel that grows with C's rows into its own buffer, outside every
// allocator of ours, and keeps those pages resident: 31 MiB for the LM head's
// dW at 32000 rows and k = 256, 55 MiB at k = 1024, which no tag saw
// (docs/memory-model.md §7). Blocks of 2048 rows pack about 2-4 MiB a call;
// B is packed again per block, a small part of a block's multiply-adds.
constexpr std::int64_t kMaxTileRows = 2048;

// How C is cut into tiles: row blocks of at most kMaxTileRows, then whole
// batch matrices when there are enough of them, else each block into `parts`
// stripes along its longer side. All threading is OpenMP's (OpenBLAS runs
// single-threaded), so GEMMs and the other ops never compete with a second,
// spinning thread pool.
struct Split {
    std::int64_t batch, row_blocks, parts;
    bool along_m;

    std::int64_t tiles() const { return batch * row_blocks * parts; }

    Tile tile(std::int64_t t, const GemmArgs& g) const {
        const std::int64_t i = t / (row_blocks * parts), block = t / parts % row_blocks, p = t % parts;
        const std::int64_t block_rows = (g.m + row_blocks - 1) / row_blocks;
        const std::int64_t r0 = std::min(g.m, block * block_rows), r1 = std::min(g.m, r0 + block_rows);
        const std::int64_t len = along_m ? r1 - r0 : g.n;
        // Stripes in multiples of 16 keep the BLAS micro-kernels' panels full.
        const std::int64_t step = (len + parts * 16 - 1) / (parts * 16) * 16;
        const std::int64_t lo = std::min(len, p * step), hi = std::min(len, lo + step);
        return along_m ? Tile{i, r0 + lo, r0 + hi, 0, g.n} : Tile{i, r0, r1, lo, hi};
    }
};

Split split_gemm(const GemmArgs& g, int threads) {
    constexpr double kMinTileWork = 1 << 20;  // multiply-adds below which a thread is not worth starting
    const double work =
        static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(std::max<std::int64_t>(g.k, 1));
    const std::int64_t row_blocks = std::max<std::int64_t>(1, (g.m + kMaxTileRows - 1) / kMaxTileRows);
    const std::int64_t block_rows = (g.m + row_blocks - 1) / row_blocks;
    const bool along_m = block_rows >= g.n;
    std::int64_t parts = 1;
    if (g.batch * row_blocks < threads) {
        const std::int64_t longest = (along_m ? block_rows : g.n) / 16;
        const auto affordable = static_cast<std::int64_t>(work / static_cast<double>(row_blocks) / kMinTileWork);
        const std::int64_t blocks = g.batch * row_blocks;
        parts = std::max<std::int64_t>(1, std::min({(threads + blocks - 1) / blocks, longest, affordable}));
    }
    return {g.batch, row_blocks, parts, along_m};
}

void sgemm_tile(const GemmArgs& g, const F32View& a, const F32View& b, const F32View& c, const Tile& t) {
    if (t.m1 <= t.m0 || t.n1 <= t.n0) return;
    const float* ap = a.data + t.batch * a.stride + (g.trans_a ? t.m0 : t.m0 * a.ld);
    const float* bp = b.data + t.batch * b.stride + (g.trans_b ? t.n0 * b.ld : t.n0);
    float* cp = c.data + t.batch * c.stride + t.m0 * c.ld + t.n0;
    cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
                static_cast<blasint>(t.m1 - t.m0), static_cast<blasint>(t.n1 - t.n0), static_cast<blasint>(g.k),
                g.alpha, ap, static_cast<blasint>(a.ld), bp, static_cast<blasint>(b.ld), g.beta, cp,
                static_cast<blasint>(c.ld));
}

void check(const GemmArgs& g) {
    check_gemm_args(g, "cpu");
    // Host pointers are read here: a null one would crash instead of raising.
    for (const Operand& op : {operand_a(g), operand_b(g), operand_c(g)})
        cpu::require(op.data != nullptr || op.rows * op.cols == 0, "gemm", "null operand");
}

}  // namespace

std::uint64_t CpuBackend::gemm_workspace_bytes(const GemmArgs& g) const {
    return 4 * (operand_a(g).packed_floats() + operand_b(g).packed_floats() + operand_c(g).packed_floats());
}

void CpuBackend::gemm(const GemmArgs& g, Workspace ws) {
    check(g);
    cpu::require_workspace(ws.ptr, ws.bytes, gemm_workspace_bytes(g), "gemm");
    if (g.m == 0 || g.n == 0) return;
    auto* scratch = static_cast<float*>(ws.ptr);
    const F32View a = as_f32(operand_a(g), scratch, g.a, threads_);
    const F32View b = as_f32(operand_b(g), scratch, g.b, threads_);
    const Operand c_op = operand_c(g);
    const void* c_read = g.beta != 0.0f ? c_source(g) : nullptr;
    if (c_op.dtype == DType::f32 && c_read != nullptr && c_read != g.c) copy_f32_c(c_op, c_read, threads_);
    const F32View c = as_f32(c_op, scratch, c_read, threads_);
    const Split split = split_gemm(g, threads_);
#pragma omp parallel for num_threads(split.tiles() > 1 ? threads_ : 1) schedule(static)
    for (std::int64_t t = 0; t < split.tiles(); ++t) sgemm_tile(g, a, b, c, split.tile(t, g));
    if (c_op.dtype != DType::f32)
        cpu::with_float_type(c_op.dtype, [&](auto t) { narrow<decltype(t)>(c_op, c.data, threads_); });
}

}  // namespace tune::kernels

// The emulated WMMA (tests/cuda_emu/include/mma.h): m16n16k16 products in
// both operand types and layouts match a host reference, and what a GPU
// would corrupt on fails the launch or reads stale data: lanes missing at a
// collective, lanes disagreeing on the pointer, misaligned pointers, a tile
// past its allocation, a load of other lanes' writes without a __syncwarp.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/launch.cuh"
#include "kernels/math/half.h"

namespace {

namespace wmma = nvcuda::wmma;
using tune::math::bf16;
using tune::math::fp16;

__half operand(fp16 v) { return __half(__half_raw{v.bits}); }
__nv_bfloat16 operand(bf16 v) { return __nv_bfloat16(__nv_bfloat16_raw{v.bits}); }

// C (16, 16) = A (16, 32) B (32, 16) + C0, A row-major, B column-major or
// row-major; C0 read and C written in `layout`.
template <class Tc, class LayoutB>
__global__ void product_kernel(float* c, const Tc* a, const Tc* b, const float* c0, wmma::layout_t layout) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, Tc, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, Tc, LayoutB> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(acc, c0, 16, layout);
    constexpr bool b_rows = std::is_same_v<LayoutB, wmma::row_major>;
    for (int k = 0; k < 32; k += 16) {
        wmma::load_matrix_sync(fa, a + k, 32);
        wmma::load_matrix_sync(fb, b_rows ? b + k * 16 : b + k, b_rows ? 16 : 32);
        wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(c, acc, 16, layout);
}

// Lane l writes the shares lane l + 1 loads (elements e = l + 1 (mod 32),
// + 32, ...) of a shared tile, then the warp loads it: without the
// __syncwarp, lane 0 loads before lane 31 has written its share.
__global__ void share_kernel(float* out, float seed, bool sync) {
    alignas(32) __shared__ float tile[256];
    const int lane = static_cast<int>(threadIdx.x);
    for (int e = (lane + 1) % 32; e < 256; e += 32) tile[e] = seed + static_cast<float>(e);
    if (sync) __syncwarp();
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(acc, tile, 16, wmma::mem_row_major);
    wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
}

// The faults: lanes 0-15 only; a pointer per lane; a misaligned pointer;
// a tile whose rows run past the end of its allocation.
__global__ void fault_kernel(float* out, const float* in, int which) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 1.0f);
    switch (which) {
        case 0:
            if (threadIdx.x < 16) wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
            break;
        case 1:
            wmma::load_matrix_sync(acc, in + (threadIdx.x % 2) * 16, 16, wmma::mem_row_major);
            break;
        case 2:
            wmma::load_matrix_sync(acc, in + 4, 16, wmma::mem_row_major);
            break;
        default:
            wmma::load_matrix_sync(acc, in + 16, 16, wmma::mem_row_major);
            break;
    }
}

template <class T>
T* device_copy(const std::vector<T>& host) {
    void* p = nullptr;
    REQUIRE(cudaMalloc(&p, host.size() * sizeof(T)) == cudaSuccess);
    REQUIRE(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
    return static_cast<T*>(p);
}

std::vector<float> to_host(const float* d, std::size_t n) {
    std::vector<float> out(n);
    REQUIRE(cudaMemcpy(out.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    return out;
}

// Runs product_kernel for storage type S (its operands rounded to S) and checks it against fp64 on the host.
template <class S, class Tc, class LayoutB>
void check_product(wmma::layout_t layout) {
    constexpr bool b_rows = std::is_same_v<LayoutB, wmma::row_major>;
    std::vector<Tc> a(16 * 32), b(32 * 16);
    std::vector<float> av(a.size()), bv(b.size()), c0(256);
    for (int i = 0; i < 16 * 32; ++i) {
        const S sa = tune::math::from_float<S>(static_cast<float>((i * 7) % 23) / 8.0f - 1.3f);
        const S sb = tune::math::from_float<S>(static_cast<float>((i * 5) % 19) / 16.0f - 0.6f);
        a[i] = operand(sa), av[i] = tune::math::to_float(sa);
        b[i] = operand(sb), bv[i] = tune::math::to_float(sb);
    }
    for (int i = 0; i < 256; ++i) c0[i] = static_cast<float>(i % 13) - 6.0f;
    float* d_c = device_copy(std::vector<float>(256, 0.0f));
    const Tc* d_a = device_copy(a);
    const Tc* d_b = device_copy(b);
    const float* d_c0 = device_copy(c0);
    TUNE_LAUNCH((product_kernel<Tc, LayoutB>), 1, 32, 0, nullptr)(d_c, d_a, d_b, d_c0, layout);
    REQUIRE(cudaGetLastError() == cudaSuccess);
    const std::vector<float> c = to_host(d_c, 256);
    const bool rows = layout == wmma::mem_row_major;
    for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 16; ++n) {
            double want = c0[rows ? m * 16 + n : n * 16 + m];
            for (int k = 0; k < 32; ++k) want += double(av[m * 32 + k]) * bv[b_rows ? k * 16 + n : n * 32 + k];
            INFO("m " << m << " n " << n);
            CHECK(c[rows ? m * 16 + n : n * 16 + m] == Approx(want).margin(1e-5));
        }
    for (const void* p : {static_cast<const void*>(d_c), static_cast<const void*>(d_a), static_cast<const void*>(d_b),
                          static_cast<const void*>(d_c0)})
        cudaFree(const_cast<void*>(p));
}

std::string launch_error() {
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
}

}  // namespace

TEST_CASE("emulated WMMA: m16n16k16 products in fp16 and bf16, both operand and memory layouts") {
    check_product<fp16, __half, wmma::col_major>(wmma::mem_row_major);
    check_product<fp16, __half, wmma::row_major>(wmma::mem_col_major);
    check_product<bf16, __nv_bfloat16, wmma::col_major>(wmma::mem_col_major);
    check_product<bf16, __nv_bfloat16, wmma::row_major>(wmma::mem_row_major);
}

TEST_CASE("emulated WMMA: a load of other lanes' writes needs a __syncwarp") {
    float* out = device_copy(std::vector<float>(256, 0.0f));
    auto expected = [](float seed) {
        std::vector<float> v(256);
        for (int e = 0; e < 256; ++e) v[e] = seed + static_cast<float>(e);
        return v;
    };
    TUNE_LAUNCH(share_kernel, 1, 32, 0, nullptr)(out, 1000.0f, true);
    REQUIRE(cudaGetLastError() == cudaSuccess);
    CHECK(to_host(out, 256) == expected(1000.0f));
    TUNE_LAUNCH(share_kernel, 1, 32, 0, nullptr)(out, 2000.0f, false);
    REQUIRE(cudaGetLastError() == cudaSuccess);
    const std::vector<float> stale = to_host(out, 256);
    CHECK(stale != expected(2000.0f));
    CHECK(stale[0] != 2000.0f);  // lane 0's share, written by lane 31 after lane 0 loaded it
    cudaFree(out);
}

TEST_CASE("emulated WMMA: lanes missing, disagreeing pointers, misalignment and overruns fail the launch") {
    float* out = device_copy(std::vector<float>(256, 0.0f));
    const float* in = device_copy(std::vector<float>(256, 0.0f));
    TUNE_LAUNCH(fault_kernel, 1, 32, 0, nullptr)(out, in, 0);
    CHECK_THAT(launch_error(), Catch::Contains("32 lanes"));
    TUNE_LAUNCH(fault_kernel, 1, 32, 0, nullptr)(out, in, 1);
    CHECK_THAT(launch_error(), Catch::Contains("different pointers"));
    TUNE_LAUNCH(fault_kernel, 1, 32, 0, nullptr)(out, in, 2);
    CHECK_THAT(launch_error(), Catch::Contains("256-bit aligned"));
    TUNE_LAUNCH(fault_kernel, 1, 32, 0, nullptr)(out, in, 3);  // in + 16, 16 rows of 16: the last row overruns
    CHECK_THAT(launch_error(), Catch::Contains("past the end"));
    cudaFree(out);
    cudaFree(const_cast<float*>(in));
}

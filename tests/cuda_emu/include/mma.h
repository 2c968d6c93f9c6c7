// nvcuda::wmma for the emulated device: the m16n16k16 shape with __half or
// __nv_bfloat16 operands and float accumulators, row- or column-major, as
// tune's tensor-core kernels use them. Anything else fails to compile here.
//
// Model. Every call is warp-collective, as on a GPU: the 32 lanes of the
// warp meet at it (a lane missing, or lanes passing different pointers or
// leading dimensions, fails the launch), and each lane moves only its own
// share of the tile:
//  - load_matrix_sync: lane l reads the elements e = l, l + 32, ... (8 of
//    the 256, row-major order over the tile) with plain loads (so
//    AddressSanitizer sees them, and an extent past its device allocation
//    fails), then the lanes exchange them. Reads happen as each lane
//    arrives, so data other lanes wrote without a __syncwarp before the
//    load reads stale, as it can on hardware.
//  - matrix_a / matrix_b fragments then hold the whole tile in every lane
//    (fp32 copies of the 16-bit values); they have no x[] here, so a kernel
//    cannot depend on the hardware's element-to-lane mapping.
//  - accumulator fragments hold lane l's 8 elements: x[i] is element
//    e = i * 32 + l of the (16, 16) tile in row-major order. An arbitrary
//    mapping (the hardware's differs): kernels may only apply the same
//    operation to every element.
//  - mma_sync: each lane computes its 8 elements of D = A B + C, products of
//    the 16-bit values summed in fp32 in k order. Tensor cores round their
//    sums differently; this proves indexing and data flow, not their
//    numerics.
//  - store_matrix_sync: after the lanes meet, each writes its 8 elements,
//    so a lane reading another's element without a __syncwarp reads stale.
// Pointers must be 256-bit aligned and ldm a multiple of 16 bytes, as the
// hardware requires; anything else fails the launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/math/half.h"
#include "tune_emu/device_code.h"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace emu {

constexpr int kTile = 16;
constexpr int kLanes = 32;
constexpr int kOwned = kTile * kTile / kLanes;  // elements per lane

inline int lane() { return static_cast<int>(::tune_emu::current_thread().linear % kLanes); }

inline float value(__half h) { return ::tune::math::to_float(::tune::math::fp16{__half_raw(h).x}); }
inline float value(__nv_bfloat16 h) { return ::tune::math::to_float(::tune::math::bf16{__nv_bfloat16_raw(h).x}); }
inline float value(float f) { return f; }

// Offset of element (r, c) of a tile with leading dimension ldm.
inline std::size_t offset(int r, int c, unsigned ldm, bool row_major) {
    return row_major ? static_cast<std::size_t>(r) * ldm + c : static_cast<std::size_t>(c) * ldm + r;
}

// What every lane passes to a call; the lanes' must agree.
struct Args {
    const void* p;
    unsigned ldm;
    int layout;
};

// Each lane's share of a load: its arguments and its 8 values.
struct Share {
    Args args;
    float v[kOwned];
};

[[noreturn]] inline void fail(const char* call, const char* what) {
    const std::string message = std::string(call) + ": " + what;
    ::tune_emu::device_fault(message.c_str());
}

// The hardware's requirements on the pointer and leading dimension.
inline void check_args(const char* call, const void* p, unsigned ldm, std::size_t element_bytes) {
    if (reinterpret_cast<std::uintptr_t>(p) % 32 != 0) fail(call, "the pointer is not 256-bit aligned");
    if ((ldm * element_bytes) % 16 != 0) fail(call, "ldm is not a multiple of 16 bytes");
    if (ldm < kTile) fail(call, "ldm is smaller than the tile");
    // One lane checks the extent (the lanes' arguments are compared after they meet).
    const std::size_t extent = (static_cast<std::size_t>(kTile - 1) * ldm + kTile) * element_bytes;
    if (lane() == 0) ::tune_emu::check_device_extent(p, extent, call);
}

inline void check_same(const char* call, const Share* all, const Args& mine) {
    for (int i = 0; i < kLanes; ++i)
        if (all[i].args.p != mine.p || all[i].args.ldm != mine.ldm || all[i].args.layout != mine.layout)
            fail(call, "the warp's lanes passed different pointers, leading dimensions or layouts");
}

// Lane l's share of a tile at p: elements l, l + 32, ... in row-major order.
template <class T>
void read_share(float (&v)[kOwned], const T* p, unsigned ldm, bool row_major) {
    const int l = lane();
    for (int i = 0; i < kOwned; ++i) {
        const int e = i * kLanes + l;
        v[i] = value(p[offset(e / kTile, e % kTile, ldm, row_major)]);
    }
}

// The warp's lanes meet; every lane gets every lane's share.
inline void meet(const char* call, const Share& mine, Share (&all)[kLanes]) {
    ::tune_emu::warp_gather(&mine, sizeof mine, all);
    check_same(call, all, mine.args);
}

template <class T>
constexpr bool is_operand_type = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

}  // namespace emu

// matrix_a (m, k) and matrix_b (k, n): the whole tile in every lane.
template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the emulated WMMA has the m16n16k16 shape only");
    static_assert(std::is_same_v<Use, matrix_a> || std::is_same_v<Use, matrix_b>, "an operand fragment");
    static_assert(emu::is_operand_type<T>, "the emulated WMMA has __half and __nv_bfloat16 operands only");
    static_assert(std::is_same_v<Layout, row_major> || std::is_same_v<Layout, col_major>,
                  "an operand fragment names its layout");

public:
    float tile[emu::kTile * emu::kTile];  // row-major over (m, k) or (k, n), whatever the memory layout
};

// The float accumulator: lane l's 8 elements (see the top of the file).
template <>
class fragment<accumulator, 16, 16, 16, float, void> {
public:
    static constexpr int num_elements = emu::kOwned;
    float x[emu::kOwned];
};

template <class Use, class T, class Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
    constexpr bool row = std::is_same_v<Layout, row_major>;
    const char* call = "load_matrix_sync";
    emu::check_args(call, p, ldm, sizeof(T));
    emu::Share mine{{p, ldm, row ? 0 : 1}, {}};
    emu::read_share(mine.v, p, ldm, row);
    emu::Share all[emu::kLanes];
    emu::meet(call, mine, all);
    for (int l = 0; l < emu::kLanes; ++l)
        for (int i = 0; i < emu::kOwned; ++i) f.tile[i * emu::kLanes + l] = all[l].v[i];
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm,
                             layout_t layout) {
    const char* call = "load_matrix_sync";
    emu::check_args(call, p, ldm, sizeof(float));
    emu::Share mine{{p, ldm, static_cast<int>(layout)}, {}};
    emu::read_share(mine.v, p, ldm, layout == mem_row_major);
    emu::Share all[emu::kLanes];
    emu::meet(call, mine, all);
    for (int i = 0; i < emu::kOwned; ++i) f.x[i] = mine.v[i];
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm,
                              layout_t layout) {
    const char* call = "store_matrix_sync";
    emu::check_args(call, p, ldm, sizeof(float));
    emu::Share mine{{p, ldm, static_cast<int>(layout)}, {}};
    emu::Share all[emu::kLanes];
    emu::meet(call, mine, all);
    const int l = emu::lane();
    for (int i = 0; i < emu::kOwned; ++i) {
        const int e = i * emu::kLanes + l;
        p[emu::offset(e / emu::kTile, e % emu::kTile, ldm, layout == mem_row_major)] = f.x[i];
    }
}

inline void fill_fragment(fragment<accumulator, 16, 16, 16, float>& f, float v) {
    for (float& x : f.x) x = v;
}

// D = A B + C; d may be c.
template <class T, class LayoutA, class LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, T, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LayoutB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
    __syncwarp();  // warp-collective: every lane must be here
    const int l = emu::lane();
    float out[emu::kOwned];
    for (int i = 0; i < emu::kOwned; ++i) {
        const int e = i * emu::kLanes + l, m = e / emu::kTile, n = e % emu::kTile;
        float acc = c.x[i];
        for (int k = 0; k < emu::kTile; ++k) acc += a.tile[m * emu::kTile + k] * b.tile[k * emu::kTile + n];
        out[i] = acc;
    }
    for (int i = 0; i < emu::kOwned; ++i) d.x[i] = out[i];
}

}  // namespace nvcuda::wmma

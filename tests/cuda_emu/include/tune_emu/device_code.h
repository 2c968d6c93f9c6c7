// The CUDA language as host C++, for the emulated device: kernels/cuda/*.cu
// compile unchanged except that launches go through TUNE_LAUNCH
// (kernels/cuda/launch.cuh), which here calls tune_emu::launch.
//
//  - __global__/__device__/__host__ vanish; __forceinline__ is inline.
//  - __shared__ is `static thread_local`: every thread of a block runs as a
//    fiber on one worker thread and one worker runs one block at a time, so
//    the block's threads share the variable and blocks on other workers
//    have their own. __constant__ is an ordinary global.
//  - threadIdx, blockIdx, blockDim and gridDim read the running fiber's
//    context; __syncthreads and the warp collectives switch fibers
//    (tune_emu/block_runner.h).
#pragma once

#include <math.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static thread_local
#define __constant__

struct uint3 {
    unsigned int x = 0, y = 0, z = 0;
};

struct dim3 {
    unsigned int x = 1, y = 1, z = 1;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

struct CUstream_st;
using cudaStream_t = CUstream_st*;

namespace tune_emu {

// What the running fiber is: its thread and block and the launch shape.
struct ThreadContext {
    uint3 thread_idx;
    uint3 block_idx;
    dim3 block_dim;
    dim3 grid_dim;
    unsigned linear = 0;  // x + y*X + z*X*Y: warps are 32 consecutive linear ids
    class BlockRunner* runner = nullptr;
};

ThreadContext& current_thread();
void set_current_thread(ThreadContext* context);  // the runtime's, between fibers

// Fiber-switching collectives (block_runner.cpp).
void sync_block();
int sync_block_reduce(int predicate, int how);                                    // how: 0 or, 1 and, 2 count
std::uint64_t warp_exchange(unsigned mask, std::uint64_t bits, int source_lane);  // value of source_lane
unsigned warp_ballot(unsigned mask, int predicate);
// Every lane of the warp contributes `bytes` (at most kWarpGatherBytes) at
// `mine`; once all 32 have, each receives the 32 contributions in lane
// order at `all` (the emulated WMMA's exchange of tile shares).
constexpr std::size_t kWarpGatherBytes = 64;
void warp_gather(const void* mine, std::size_t bytes, void* all);
// When p is device memory, [p, p + bytes) must lie in its one allocation;
// otherwise the launch fails naming `what` (other memory, such as
// __shared__, is not checked).
void check_device_extent(const void* p, std::size_t bytes, const char* what);
[[noreturn]] void device_fault(const char* what);  // an error in device code: ends the launch with it

// One kernel launch as the runtime sees it: thread_entry(ctx) runs one
// thread's body with the context set.
struct KernelLaunch {
    const char* name = "";
    dim3 grid, block;
    std::size_t shared_bytes = 0;
    cudaStream_t stream = nullptr;
    void (*thread_entry)(const void* ctx) = nullptr;
    const void* ctx = nullptr;
};

// Runs every block (synchronously: streams execute in order, and at once).
// Errors are recorded for cudaGetLastError, as a real launch's are.
void launch(const KernelLaunch& launch);

// Stream capture: whether `stream` is capturing now. holds: capturing, or deferred (a stream made
// with a priority), so that work given to it is recorded, not run: for its graph, run in order
// when the graph is launched, or held until something waits for the stream.
bool capturing(cudaStream_t stream);
bool holds(cudaStream_t stream);
void record(cudaStream_t stream, std::function<void()> work);
// Runs everything a deferred stream holds (nothing for any other stream).
void drain(cudaStream_t stream);

template <class Body, class... Args>
struct LaunchArgs {
    Body body;
    std::tuple<Args...> args;
    // Each thread gets its own copies of the arguments, as on a GPU.
    static void run(const void* self) {
        const auto* l = static_cast<const LaunchArgs*>(self);
        std::apply(l->body, l->args);
    }
};

template <class Body>
struct Launcher {
    const char* name;
    dim3 grid, block;
    std::size_t shared_bytes;
    cudaStream_t stream;
    Body body;

    template <class... Args>
    void operator()(const Args&... args) const {
        using Packed = LaunchArgs<Body, std::decay_t<Args>...>;
        const Packed packed{body, std::tuple<std::decay_t<Args>...>(args...)};
        // Held: the arguments as they are now, launched when the graph is (a graph keeps its kernels'
        // arguments) or when the deferred stream is waited for.
        if (holds(stream)) {
            record(stream, [l = *this, packed] {
                launch(KernelLaunch{l.name, l.grid, l.block, l.shared_bytes, l.stream, &Packed::run, &packed});
            });
            return;
        }
        launch(KernelLaunch{name, grid, block, shared_bytes, stream, &Packed::run, &packed});
    }
};

template <class Body>
Launcher<Body> make_launcher(const char* name, dim3 grid, dim3 block, std::size_t shared_bytes, cudaStream_t stream,
                             Body body) {
    return Launcher<Body>{name, grid, block, shared_bytes, stream, body};
}

}  // namespace tune_emu

#define threadIdx (::tune_emu::current_thread().thread_idx)
#define blockIdx (::tune_emu::current_thread().block_idx)
#define blockDim (::tune_emu::current_thread().block_dim)
#define gridDim (::tune_emu::current_thread().grid_dim)
static constexpr int warpSize = 32;

inline void __syncthreads() { ::tune_emu::sync_block(); }
inline int __syncthreads_or(int p) { return ::tune_emu::sync_block_reduce(p, 0); }
inline int __syncthreads_and(int p) { return ::tune_emu::sync_block_reduce(p, 1); }
inline int __syncthreads_count(int p) { return ::tune_emu::sync_block_reduce(p, 2); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::tune_emu::warp_ballot(mask, 0); }

template <class T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move up to 8 bytes");
    if (width != 32) ::tune_emu::device_fault("__shfl_sync: only width 32 is emulated");
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    bits = ::tune_emu::warp_exchange(mask, bits, src_lane & 31);
    T out;
    std::memcpy(&out, &bits, sizeof(T));
    return out;
}

template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    const int lane = static_cast<int>(::tune_emu::current_thread().linear % 32);
    return __shfl_sync(mask, v, lane ^ lane_mask, width);
}

template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    const int lane = static_cast<int>(::tune_emu::current_thread().linear % 32);
    const int src = lane + static_cast<int>(delta);
    const T got = __shfl_sync(mask, v, src < 32 ? src : lane, width);
    return got;
}

inline unsigned __ballot_sync(unsigned mask, int p) { return ::tune_emu::warp_ballot(mask, p); }
inline int __any_sync(unsigned mask, int p) { return ::tune_emu::warp_ballot(mask, p) != 0; }
inline int __all_sync(unsigned mask, int p) { return ::tune_emu::warp_ballot(mask, p) == mask; }

// Atomics: blocks run on several worker threads at once, so these are real
// atomics (GCC builtins: the .cu files are C++17, which has no atomic_ref).
template <class T>
T atomicCAS(T* address, T compare, T value) {
    __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return compare;  // the old value either way
}
template <class T>
T atomicExch(T* address, T value) {
    return __atomic_exchange_n(address, value, __ATOMIC_SEQ_CST);
}
template <class T>
T atomicAdd(T* address, T value) {
    static_assert(std::is_integral_v<T>, "atomicAdd on floats is not used by tune and not emulated");
    return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
}

inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline unsigned __float_as_uint(float f) {
    unsigned u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}
inline float __uint_as_float(unsigned u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

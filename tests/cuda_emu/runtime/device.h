// The emulated device: the one object holding its state (memory, pools,
// the last error, the workers that run blocks). It lives as long as the
// process, like a CUDA context; device() returns it.
//
// Memory is host memory from posix_memalign (exact sizes, so AddressSanitizer
// sees an overrun past any allocation), each registered so copies, frees
// and NCCL can tell device pointers from host ones. Every allocation counts
// against the device's total, and one that would pass it fails with
// cudaErrorMemoryAllocation, the path a real device takes.
// TUNE_EMU_MEMORY (bytes; default 16 GiB) sets the total and
// TUNE_EMU_WORKERS the threads that run blocks (default: the cores).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "block_runner.h"
#include "tune_emu/runtime.h"

namespace tune_emu {

class Device {
public:
    Device();
    ~Device();
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;

    std::uint64_t total_bytes() const { return total_; }
    void set_total(std::uint64_t bytes);
    std::uint64_t used_bytes() const;
    int workers() const { return static_cast<int>(runners_.size()); }

    // Device memory. `pool` tags what a pool reserved (nullptr: cudaMalloc).
    cudaError_t allocate(void** ptr, std::uint64_t bytes, const void* pool);
    // Frees an allocation; its size and pool are reported when asked for.
    cudaError_t release(void* ptr, std::uint64_t* bytes = nullptr, const void** pool = nullptr);
    // Whether [p, p + bytes) lies inside one live allocation, or inside one
    // reserved range whose pages are mapped and accessible (virtual_memory.h).
    bool is_device(const void* p, std::uint64_t bytes = 1) const;

    // Pinned host memory (cudaHostAlloc): plain host memory, kept apart from
    // the device's total, which copies with cudaMemcpyDefault may name.
    cudaError_t allocate_pinned(void** ptr, std::uint64_t bytes);
    cudaError_t release_pinned(void* ptr);
    bool is_pinned(const void* p, std::uint64_t bytes = 1) const;
    std::uint64_t pinned_bytes() const;
    // Counts `bytes` of driver pages against the total; false when they do not fit.
    bool charge_pages(std::uint64_t bytes);
    void refund_pages(std::uint64_t bytes);
    std::uint64_t pages_bytes() const;
    // Memory outside any allocation the device pretends to hold (context, library handles).
    void reserve_hidden(std::int64_t bytes);

    // The last error, as cudaGetLastError returns and clears it.
    cudaError_t record(cudaError_t status, const std::string& detail = {});
    cudaError_t take_last_error();
    cudaError_t peek_last_error();
    const std::string& detail() const { return detail_; }

    void run(const KernelLaunch& launch);

    // Set by every call that a real runtime serves from the primary context.
    std::atomic<bool> context{false};

    // NCCL failures a test asked for (ncclResult_t values; 0: none).
    std::atomic<int> nccl_init_failure{0};
    std::atomic<int> nccl_async_failure{0};
    std::atomic<std::uint64_t> matmuls{0};                 // cublasLtMatmul calls that ran
    std::atomic<std::uint64_t> matmuls_by_candidate[4]{};  // the same, by the heuristic's candidate index
    std::atomic<std::uint64_t> memset_bytes{0};            // bytes cudaMemsetAsync wrote
    std::atomic<std::uint64_t> graph_launches{0};          // cudaGraphLaunch calls that ran
    std::atomic<std::uint64_t> held_work_ran{0};           // pieces of work a deferred stream held, run since
    // Streams capturing now (global mode: a call that must wait for the device invalidates them all).
    std::mutex capture_mutex;
    std::vector<CUstream_st*> capturing;
    std::vector<CUstream_st*> deferred;  // streams made with a priority (runtime_api.cpp), under capture_mutex
    std::string nccl_failure_detail;     // set with the injection, before any communicator reads it

private:
    struct Allocation {
        std::uint64_t bytes;
        const void* pool;
    };
    void worker_main(std::size_t index);
    void run_blocks(std::size_t runner);

    std::uint64_t total_ = 0;
    mutable std::mutex memory_mutex_;
    std::map<std::uintptr_t, Allocation> allocations_;  // by start address
    std::uint64_t allocated_ = 0;
    std::uint64_t pages_ = 0;                         // driver pages (cuMemCreate), also in allocated_
    std::map<std::uintptr_t, std::uint64_t> pinned_;  // host start address: bytes
    std::uint64_t pinned_bytes_ = 0;
    std::int64_t hidden_ = 0;

    std::mutex error_mutex_;
    cudaError_t last_error_ = cudaSuccess;
    std::string detail_;

    // Workers: runners_[0] belongs to the launching thread, the rest to threads_.
    std::vector<std::unique_ptr<BlockRunner>> runners_;
    std::vector<std::thread> threads_;
    std::mutex launch_mutex_;  // one launch at a time
    std::mutex work_mutex_;
    std::condition_variable work_ready_, work_done_;
    std::uint64_t job_ = 0;  // bumped per parallel launch
    std::size_t busy_ = 0;
    bool stopping_ = false;
    const KernelLaunch* current_ = nullptr;
    std::uint64_t blocks_ = 0;
    std::atomic<std::uint64_t> next_block_{0};
    std::string launch_error_;
};

Device& device();

}  // namespace tune_emu

// Runs the blocks of a launch on one worker thread, one block at a time,
// each CUDA thread of the block on a fiber.
//
// Schedule: warp by warp, each lane resumes in order until it finishes or
// waits, so a kernel without barriers runs each thread straight through on
// one reused fiber (two context switches per thread). A warp whose 32 lanes
// all wait at a warp collective is released and run on at once; when every
// thread of the block waits at __syncthreads, the block is released. Any other state is a bug a GPU would also have and
// is reported: a barrier some threads exited before (a barrier in divergent code), a warp collective with lanes
// missing, or threads waiting at different barriers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fiber.h"
#include "tune_emu/device_code.h"

namespace tune_emu {

class BlockRunner {
public:
    BlockRunner();
    ~BlockRunner();
    BlockRunner(const BlockRunner&) = delete;
    BlockRunner& operator=(const BlockRunner&) = delete;

    // Runs block `block` of `launch`; returns an error message, empty when fine.
    std::string run_block(const KernelLaunch& launch, uint3 block);

    // Called by device code on the running fiber.
    void sync_block();
    int sync_block_reduce(int predicate, int how);
    std::uint64_t warp_exchange(unsigned mask, std::uint64_t bits, int source_lane);
    unsigned warp_ballot(unsigned mask, int predicate);
    void warp_gather(const void* mine, std::size_t bytes, void* all);
    [[noreturn]] void fault(const char* what);

private:
    enum class State : std::uint8_t { unstarted, runnable, at_block, at_warp, done };
    struct Thread {
        ThreadContext ctx;
        State state = State::unstarted;
        int fiber = -1;
        std::uint32_t block_syncs = 0;  // barriers passed: their parity picks the reduction slot
        std::uint32_t warp_syncs = 0;   // warp collectives passed: parity picks the exchange slots
    };
    struct Slot;  // a fiber and the thread it runs

    static void fiber_loop(void* slot);
    int acquire_fiber();
    void wait(State how);
    void run_warp(unsigned lo, unsigned hi);  // lanes [lo, hi) until done or at the block barrier
    bool release_block();                     // releases __syncthreads; false (and error_) when it cannot

    const KernelLaunch* launch_ = nullptr;
    std::vector<Thread> threads_;
    std::vector<std::unique_ptr<Slot>> slots_;
    std::vector<int> idle_;
    int running_ = -1;  // index into threads_
    std::string error_;
    // Per warp, two generations of 32 exchange slots; per block, two reduction accumulators.
    std::vector<std::uint64_t> exchange_;
    // Per warp, two generations of 32 gather slots of kWarpGatherBytes.
    std::vector<unsigned char> gather_;
    int reduce_[2][3] = {};
};

}  // namespace tune_emu

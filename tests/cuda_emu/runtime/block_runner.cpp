// The fiber schedule of one block (see block_runner.h).
#include "block_runner.h"

#include <cstring>
#include <exception>
#include <string>

namespace tune_emu {

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr std::size_t kStackBytes = 512 << 10;  // ASan's redzones and fake frames
#else
constexpr std::size_t kStackBytes = 128 << 10;
#endif

// Thrown on a fiber by fault(); caught in fiber_loop, never crosses a switch.
struct Fault {
    std::string what;
};

}  // namespace

struct BlockRunner::Slot {
    BlockRunner* runner;
    int index = 0;
    int thread = -1;
    std::unique_ptr<Fiber> fiber;
};

BlockRunner::BlockRunner() = default;
BlockRunner::~BlockRunner() = default;

void BlockRunner::fiber_loop(void* p) {
    auto* slot = static_cast<Slot*>(p);
    BlockRunner& r = *slot->runner;
    for (;;) {
        Thread& t = r.threads_[static_cast<std::size_t>(slot->thread)];
        try {
            r.launch_->thread_entry(r.launch_->ctx);
        } catch (const Fault& f) {
            if (r.error_.empty()) r.error_ = f.what;
        } catch (const std::exception& e) {
            if (r.error_.empty()) r.error_ = std::string("exception in device code: ") + e.what();
        }
        t.state = State::done;
        t.fiber = -1;
        r.idle_.push_back(slot->index);
        slot->thread = -1;
        slot->fiber->suspend();
    }
}

int BlockRunner::acquire_fiber() {
    if (!idle_.empty()) {
        const int i = idle_.back();
        idle_.pop_back();
        return i;
    }
    auto slot = std::make_unique<Slot>();
    slot->runner = this;
    slot->index = static_cast<int>(slots_.size());
    slot->fiber = std::make_unique<Fiber>(kStackBytes, &BlockRunner::fiber_loop, slot.get());
    slots_.push_back(std::move(slot));
    return static_cast<int>(slots_.size() - 1);
}

void BlockRunner::wait(State how) {
    Thread& t = threads_[static_cast<std::size_t>(running_)];
    t.state = how;
    slots_[static_cast<std::size_t>(t.fiber)]->fiber->suspend();
}

void BlockRunner::fault(const char* what) { throw Fault{what}; }

std::string BlockRunner::run_block(const KernelLaunch& launch, uint3 block) {
    launch_ = &launch;
    error_.clear();
    const dim3 bd = launch.block;
    const unsigned n = bd.x * bd.y * bd.z;
    threads_.assign(n, Thread{});
    for (unsigned i = 0; i < n; ++i) {
        ThreadContext& c = threads_[i].ctx;
        c.thread_idx = uint3{i % bd.x, (i / bd.x) % bd.y, i / (bd.x * bd.y)};
        c.block_idx = block;
        c.block_dim = bd;
        c.grid_dim = launch.grid;
        c.linear = i;
        c.runner = this;
    }
    const unsigned warps = (n + 31) / 32;
    exchange_.assign(static_cast<std::size_t>(warps) * 64, 0);
    gather_.assign(static_cast<std::size_t>(warps) * 64 * kWarpGatherBytes, 0);
    for (auto& r : reduce_) r[0] = 0, r[1] = 1, r[2] = 0;  // or, and, count identities

    // Warp by warp: a warp's lanes run until each finishes or waits; lanes
    // that all wait at a warp collective are released at once and run on,
    // so the warp's 32 stacks stay in cache. Then the block barrier.
    for (;;) {
        for (unsigned w = 0; w < warps && error_.empty(); ++w) run_warp(w * 32, std::min(n, w * 32 + 32));
        if (!error_.empty()) break;
        bool all_done = true;
        for (const Thread& t : threads_) all_done = all_done && t.state == State::done;
        if (all_done) break;
        if (!release_block()) break;
    }
    if (!error_.empty()) {
        // Threads still parked mid-kernel: forget their frames.
        for (Thread& t : threads_) {
            if (t.fiber < 0) continue;
            Slot& s = *slots_[static_cast<std::size_t>(t.fiber)];
            s.fiber->reset();
            s.thread = -1;
            idle_.push_back(t.fiber);
            t.fiber = -1;
        }
    }
    launch_ = nullptr;
    return error_;
}

void BlockRunner::run_warp(unsigned lo, unsigned hi) {
    for (;;) {
        for (unsigned i = lo; i < hi && error_.empty(); ++i) {
            Thread& t = threads_[i];
            if (t.state == State::unstarted) {
                t.fiber = acquire_fiber();
                slots_[static_cast<std::size_t>(t.fiber)]->thread = static_cast<int>(i);
                t.state = State::runnable;
            }
            if (t.state != State::runnable) continue;
            running_ = static_cast<int>(i);
            set_current_thread(&t.ctx);
            slots_[static_cast<std::size_t>(t.fiber)]->fiber->resume();
            set_current_thread(nullptr);
        }
        if (!error_.empty()) return;
        bool all_at_warp = true, any_at_warp = false;
        for (unsigned i = lo; i < hi; ++i) {
            const State s = threads_[i].state;
            any_at_warp = any_at_warp || s == State::at_warp;
            all_at_warp = all_at_warp && s == State::at_warp;
        }
        if (!any_at_warp) return;  // every lane finished or waits at the block barrier
        if (!all_at_warp || hi - lo != 32) {
            error_ =
                "a warp collective (shuffle, vote, __syncwarp) with full mask was reached by only some of the "
                "warp's 32 lanes (others exited, wait elsewhere, or the block is not a multiple of 32 threads)";
            return;
        }
        for (unsigned i = lo; i < hi; ++i) {
            threads_[i].state = State::runnable;
            ++threads_[i].warp_syncs;
        }
    }
}

bool BlockRunner::release_block() {
    bool any_done = false, all_at_block = true;
    for (const Thread& t : threads_) {
        if (t.state == State::done)
            any_done = true;
        else
            all_at_block = all_at_block && t.state == State::at_block;
    }
    if (!all_at_block) {
        error_ = "deadlock: the block's threads wait at different barriers";
        return false;
    }
    if (any_done) {
        error_ =
            "__syncthreads() reached by only some of the block's threads (the others exited): a barrier in "
            "divergent code";
        return false;
    }
    const std::uint32_t generation = threads_[0].block_syncs;
    int* next = reduce_[(generation + 1) & 1];
    next[0] = 0, next[1] = 1, next[2] = 0;
    for (Thread& t : threads_) {
        t.state = State::runnable;
        ++t.block_syncs;
    }
    return true;
}

void BlockRunner::sync_block() { wait(State::at_block); }

int BlockRunner::sync_block_reduce(int predicate, int how) {
    Thread& t = threads_[static_cast<std::size_t>(running_)];
    int* acc = reduce_[t.block_syncs & 1];
    const bool p = predicate != 0;
    acc[0] |= p ? 1 : 0;
    acc[1] &= p ? 1 : 0;
    acc[2] += p ? 1 : 0;
    wait(State::at_block);
    // After release, the accumulator of this generation is complete and is
    // not cleared until the barrier after next.
    Thread& me = threads_[static_cast<std::size_t>(running_)];
    return reduce_[(me.block_syncs - 1) & 1][how];
}

std::uint64_t BlockRunner::warp_exchange(unsigned mask, std::uint64_t bits, int source_lane) {
    if (mask != 0xffffffffu) fault("warp collectives with a partial mask are not emulated");
    const int me = running_;
    Thread& t = threads_[static_cast<std::size_t>(me)];
    const std::size_t warp = t.ctx.linear / 32, lane = t.ctx.linear % 32;
    std::uint64_t* slots = exchange_.data() + warp * 64 + (t.warp_syncs & 1) * 32;
    slots[lane] = bits;
    wait(State::at_warp);
    return slots[static_cast<std::size_t>(source_lane)];
}

unsigned BlockRunner::warp_ballot(unsigned mask, int predicate) {
    if (mask != 0xffffffffu) fault("warp collectives with a partial mask are not emulated");
    Thread& t = threads_[static_cast<std::size_t>(running_)];
    const std::size_t warp = t.ctx.linear / 32, lane = t.ctx.linear % 32;
    std::uint64_t* slots = exchange_.data() + warp * 64 + (t.warp_syncs & 1) * 32;
    slots[lane] = predicate != 0 ? 1 : 0;
    wait(State::at_warp);
    unsigned ballot = 0;
    for (unsigned i = 0; i < 32; ++i) ballot |= slots[i] != 0 ? 1u << i : 0u;
    return ballot;
}

void BlockRunner::warp_gather(const void* mine, std::size_t bytes, void* all) {
    if (bytes > kWarpGatherBytes) fault("warp_gather: more bytes per lane than kWarpGatherBytes");
    Thread& t = threads_[static_cast<std::size_t>(running_)];
    const std::size_t warp = t.ctx.linear / 32, lane = t.ctx.linear % 32;
    unsigned char* slots = gather_.data() + (warp * 2 + (t.warp_syncs & 1)) * 32 * kWarpGatherBytes;
    std::memcpy(slots + lane * kWarpGatherBytes, mine, bytes);
    wait(State::at_warp);
    // This generation's slots are not written again before every lane has
    // passed the next collective, so reading them now is safe.
    auto* out = static_cast<unsigned char*>(all);
    for (std::size_t i = 0; i < 32; ++i) std::memcpy(out + i * bytes, slots + i * kWarpGatherBytes, bytes);
}

}  // namespace tune_emu

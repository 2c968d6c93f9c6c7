// The trainer's tagged allocator. Every device buffer the trainer owns comes
// from here with a Component tag, so a trial can report live and peak bytes
// and the per-component breakdown at the moment of the peak, and the
// estimator's prediction can be checked against it (docs/memory-model.md).
//
// Large buffers are mapped pages (train/memory/page_pool.h): on the CPU backend
// from 64 KiB, the process's own pages; on a backend that offers a page
// mapper, from its page size (CUDA with TUNE_CUDA_PAGES=1: the driver's 2 MiB
// pages; by default the CUDA backend offers none and its pool serves all).
// Freed ones are kept for the next request only while in-use plus kept bytes
// stay within the tagged peak, and otherwise go back, so the memory held
// never exceeds what was there before (the baseline) plus the tagged peak and
// the rounding to pages. On the CPU, through malloc, glibc raises its mmap
// threshold after the first large free (up to 32 MiB) and then serves such
// buffers from its heap, which keeps freed activations resident however
// large the heap grew, and the process's real peak drifted above the tagged
// peak; on a GPU the stream-ordered pool holds its slack beyond it
// (the real-memory file in docs/results/).
// Small buffers (norm statistics, token windows) stay with the backend's
// allocator, and the pool gives nothing back for them (the heap's pages are
// its own): in-use plus kept bytes may pass the tagged peak by the small
// buffers in use.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "kernels/backend.h"
#include "train/memory/arena.h"
#include "train/memory/host_page_mapper.h"
#include "train/memory/page_pool.h"

namespace tune::train {

class Allocator;

// A move-only handle that frees its bytes when it goes out of scope.
class Buffer {
public:
    Buffer() = default;
    Buffer(Buffer&& other) noexcept { swap(other); }
    Buffer& operator=(Buffer&& other) noexcept {
        Buffer(std::move(other)).swap(*this);
        return *this;
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() { reset(); }

    void reset() noexcept;
    void* get() const { return ptr_; }
    template <class T>
    T* as() const {
        return static_cast<T*>(ptr_);
    }
    // The byte at `offset` (for views into flat buffers).
    void* at(std::uint64_t offset) const { return static_cast<unsigned char*>(ptr_) + offset; }
    std::uint64_t bytes() const { return bytes_; }
    Component tag() const { return tag_; }
    explicit operator bool() const { return ptr_ != nullptr; }

private:
    friend class Allocator;
    Buffer(Allocator* owner, void* ptr, std::uint64_t bytes, Component tag)
        : owner_(owner), ptr_(ptr), bytes_(bytes), tag_(tag) {}
    void swap(Buffer& other) noexcept {
        std::swap(owner_, other.owner_);
        std::swap(ptr_, other.ptr_);
        std::swap(bytes_, other.bytes_);
        std::swap(tag_, other.tag_);
    }

    Allocator* owner_ = nullptr;
    void* ptr_ = nullptr;
    std::uint64_t bytes_ = 0;
    Component tag_ = Component::overhead;
};

// Where an allocator's buffers live: the backend's device memory, or the
// host memory it reaches (Backend::allocate_host), where offload keeps its
// states. The CPU backend's are both this process's pages.
enum class Placement { device, host };

// What the ledger saw, in order: buffers allocated and freed, and the phases
// set, so that a replayed graph's buffers are counted as the run that recorded
// it counted them (Allocator::count) and planned in its arena (plan_arena).
struct LedgerEvent {
    enum class Kind : std::uint8_t { allocate, release, phase };
    Kind kind = Kind::phase;
    Component tag = Component::overhead;
    std::uint64_t bytes = 0;
    const void* ptr = nullptr;  // allocate, release: the buffer, which pairs them
    std::string phase;
    bool operator==(const LedgerEvent&) const = default;
};
using LedgerTrace = std::vector<LedgerEvent>;

class Allocator {
public:
    // limit: live bytes beyond which allocate() raises OutOfMemoryError; 0 = none.
    Allocator(kernels::Backend& backend, std::uint64_t limit, Placement where = Placement::device);
    Allocator(const Allocator&) = delete;
    Allocator& operator=(const Allocator&) = delete;

    // Zero-byte requests give an empty handle and count nothing.
    Buffer allocate(Component tag, std::uint64_t bytes);
    // allocate + fill_zero.
    Buffer zeros(Component tag, std::uint64_t bytes);

    // The phase the peak is attributed to ("forward", "head-backward", ...).
    void set_phase(std::string phase);

    // While set, buffers take `arena`'s planned places instead of the backend's memory: a graph being
    // recorded (train/micro_batch_graphs.h). Its buffers must be freed before it is unset.
    void place_in(Arena* arena) { arena_ = arena; }
    // The ledger's events from start_trace() on, returned and no longer kept by the matching
    // end_trace(). Traces nest: an event reaches every open one.
    void start_trace() { traces_.emplace_back(); }
    LedgerTrace end_trace();
    // Counts a trace's buffers and phases as if they were allocated and freed again, touching no
    // memory: what a replayed graph does to the ledger. Open traces see them as events.
    void count(const LedgerTrace& trace);
    const std::string& phase() const { return phase_; }

    std::uint64_t live() const { return live_; }
    std::uint64_t live(Component tag) const { return by_tag_[static_cast<std::size_t>(tag)]; }
    std::uint64_t peak() const { return peak_.peak; }
    // Components at the first moment the peak was reached (ties go to the earlier phase).
    const MemoryBreakdown& peak_breakdown() const { return peak_; }
    // The most bytes of one tag ever live at once (LOMO's one-gradient-at-a-time check).
    std::uint64_t tag_peak(Component tag) const { return tag_peak_[static_cast<std::size_t>(tag)]; }
    std::uint64_t limit() const { return limit_; }
    kernels::Backend& backend() { return backend_; }

    // Freed page-mapped buffers kept for reuse (0 without a page mapper).
    std::uint64_t kept() const { return pages_.kept(); }
    // Bytes of fresh pages mapped so far (0 without a page mapper).
    std::uint64_t mapped() const { return pages_.mapped(); }
    // Bytes of kept pages moved into a larger request so far.
    std::uint64_t moved() const { return pages_.moved(); }
    // Page-mapped buffers in use, in whole pages, and the most pages held at once (in use plus kept).
    std::uint64_t pages_in_use() const { return pages_.in_use(); }
    std::uint64_t pages_held_high() const { return pages_.held_high(); }
    // Buffers at least this large are mapped pages; 0: none are.
    std::uint64_t min_page_buffer_bytes() const { return mapper_ != nullptr ? mapper_->min_buffer_bytes() : 0; }

private:
    friend class Buffer;
    bool maps_pages(std::uint64_t bytes) const { return mapper_ != nullptr && bytes >= mapper_->min_buffer_bytes(); }
    void release(void* ptr, std::uint64_t bytes, Component tag) noexcept;
    void count_in(Component tag, std::uint64_t bytes);
    void count_out(Component tag, std::uint64_t bytes);
    void saw(const LedgerEvent& e);

    kernels::Backend& backend_;
    std::uint64_t limit_;
    Placement where_;
    std::uint64_t live_ = 0;
    std::array<std::uint64_t, kComponentCount> by_tag_{};
    std::array<std::uint64_t, kComponentCount> tag_peak_{};
    MemoryBreakdown peak_;
    std::string phase_ = "init";
    HostPageMapper host_pages_;
    kernels::PageMapper* mapper_;  // the backend's, this process's (CPU backend), or none
    PagePool pages_;
    Arena* arena_ = nullptr;
    std::vector<LedgerTrace> traces_;  // open, innermost last
};

}  // namespace tune::train

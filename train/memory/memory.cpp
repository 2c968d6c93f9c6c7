#include "train/memory/memory.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "kernels/error.h"

namespace tune::train {

void Buffer::reset() noexcept {
    if (owner_ != nullptr && ptr_ != nullptr) owner_->release(ptr_, bytes_, tag_);
    owner_ = nullptr;
    ptr_ = nullptr;
    bytes_ = 0;
}

namespace {

// The backend's own pages, else this process's where its buffers are host
// memory (it names itself "cpu", kernels/backend.h). A GPU's host memory is
// pinned by the backend, page by page through allocate_host: no mapper.
kernels::PageMapper* page_mapper_for(kernels::Backend& backend, Placement where, HostPageMapper& host) {
    const bool host_memory = backend.name() == "cpu";
    if (where == Placement::host) return host_memory ? &host : nullptr;
    if (kernels::PageMapper* own = backend.page_mapper()) return own;
    return host_memory ? &host : nullptr;
}

}  // namespace

Allocator::Allocator(kernels::Backend& backend, std::uint64_t limit, Placement where)
    : backend_(backend),
      limit_(limit),
      where_(where),
      mapper_(page_mapper_for(backend, where, host_pages_)),
      pages_(mapper_ != nullptr ? *mapper_ : host_pages_) {}  // without a mapper the pool is never asked

Buffer Allocator::allocate(Component tag, std::uint64_t bytes) {
    if (bytes == 0) return {};
    if (limit_ > 0 && live_ + bytes > limit_)
        throw OutOfMemoryError(bytes, live_,
                               fmt::format("{} buffer in phase {}, limit {} bytes", to_string(tag), phase_, limit_));
    // Kept pages may fill what the peak leaves beside the live bytes, no more.
    const std::uint64_t room = peak_.peak > live_ + bytes ? peak_.peak - live_ - bytes : 0;
    void* ptr = nullptr;
    if (arena_ != nullptr) {
        ptr = arena_->take(bytes);
    } else if (maps_pages(bytes)) {
        ptr = pages_.take(bytes, room, live_);
    } else {
        // Not trimmed for: the heap keeps its own pages, and a kept page handed back here would
        // fault in again at the next peak.
        ptr = where_ == Placement::host ? backend_.allocate_host(bytes) : backend_.allocate(bytes);
    }
    count_in(tag, bytes);
    saw({LedgerEvent::Kind::allocate, tag, bytes, ptr, {}});
    return Buffer(this, ptr, bytes, tag);
}

void Allocator::count_in(Component tag, std::uint64_t bytes) {
    live_ += bytes;
    auto& slot = by_tag_[static_cast<std::size_t>(tag)];
    slot += bytes;
    auto& most = tag_peak_[static_cast<std::size_t>(tag)];
    most = std::max(most, slot);
    if (live_ > peak_.peak) {
        peak_.bytes = by_tag_;
        peak_.peak = live_;
        peak_.peak_phase = phase_;
    }
}

void Allocator::count_out(Component tag, std::uint64_t bytes) {
    live_ -= bytes;
    by_tag_[static_cast<std::size_t>(tag)] -= bytes;
}

void Allocator::set_phase(std::string phase) {
    saw({LedgerEvent::Kind::phase, Component::overhead, 0, nullptr, phase});
    phase_ = std::move(phase);
}

void Allocator::saw(const LedgerEvent& e) {
    for (LedgerTrace& t : traces_) t.push_back(e);
}

LedgerTrace Allocator::end_trace() {
    if (traces_.empty()) return {};
    LedgerTrace t = std::move(traces_.back());
    traces_.pop_back();
    return t;
}

void Allocator::count(const LedgerTrace& trace) {
    for (const LedgerEvent& e : trace) {
        switch (e.kind) {
            case LedgerEvent::Kind::allocate:
                count_in(e.tag, e.bytes);
                break;
            case LedgerEvent::Kind::release:
                count_out(e.tag, e.bytes);
                break;
            case LedgerEvent::Kind::phase:
                phase_ = e.phase;
                break;
        }
        saw(e);
    }
}

Buffer Allocator::zeros(Component tag, std::uint64_t bytes) {
    Buffer b = allocate(tag, bytes);
    if (!b) return b;
    if (where_ == Placement::host)
        std::memset(b.get(), 0, bytes);
    else
        backend_.fill_zero(b.get(), bytes);
    return b;
}

void Allocator::release(void* ptr, std::uint64_t bytes, Component tag) noexcept {
    if (arena_ != nullptr && arena_->holds(ptr))
        arena_->give(ptr);
    else if (maps_pages(bytes))
        pages_.give(ptr, bytes);
    else if (where_ == Placement::host)
        backend_.deallocate_host(ptr, bytes);
    else
        backend_.deallocate(ptr, bytes);
    count_out(tag, bytes);
    saw({LedgerEvent::Kind::release, tag, bytes, ptr, {}});
}

}  // namespace tune::train

// The emulated device's memory, error state and block workers.
#include "device.h"
#include "virtual_memory.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tune_emu {

namespace {

thread_local ThreadContext* t_current = nullptr;

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return fallback;
    return std::strtoull(v, nullptr, 10);
}

}  // namespace

ThreadContext& current_thread() {
    // Device builtins outside a kernel would read garbage on a GPU; here they fault loudly.
    if (t_current == nullptr) device_fault("threadIdx/blockIdx read outside a kernel");
    return *t_current;
}

void set_current_thread(ThreadContext* context) { t_current = context; }

void sync_block() { current_thread().runner->sync_block(); }
int sync_block_reduce(int predicate, int how) { return current_thread().runner->sync_block_reduce(predicate, how); }
std::uint64_t warp_exchange(unsigned mask, std::uint64_t bits, int source_lane) {
    return current_thread().runner->warp_exchange(mask, bits, source_lane);
}
unsigned warp_ballot(unsigned mask, int predicate) { return current_thread().runner->warp_ballot(mask, predicate); }
void warp_gather(const void* mine, std::size_t bytes, void* all) {
    current_thread().runner->warp_gather(mine, bytes, all);
}
void check_device_extent(const void* p, std::size_t bytes, const char* what) {
    const Device& d = device();
    if (d.is_device(p) && !d.is_device(p, bytes))
        device_fault((std::string(what) + ": the tile runs past the end of its device allocation").c_str());
}
void device_fault(const char* what) {
    if (t_current == nullptr) throw std::logic_error(std::string("tune_emu: ") + what);
    t_current->runner->fault(what);
}

// A context's own footprint, so context measurements see something (a real one is 0.3-0.6 GB).
constexpr std::int64_t kContextBytes = 64 << 20;

Device::Device() : total_(env_number("TUNE_EMU_MEMORY", 16ull << 30)), hidden_(kContextBytes) {
    std::size_t workers = env_number("TUNE_EMU_WORKERS", std::max(1u, std::thread::hardware_concurrency()));
    workers = std::max<std::size_t>(workers, 1);
    for (std::size_t i = 0; i < workers; ++i) runners_.push_back(std::make_unique<BlockRunner>());
    for (std::size_t i = 1; i < workers; ++i) threads_.emplace_back([this, i] { worker_main(i); });
}

Device::~Device() {
    {
        std::lock_guard lock(work_mutex_);
        stopping_ = true;
    }
    work_ready_.notify_all();
    for (auto& t : threads_) t.join();
    for (auto& [address, a] : allocations_) std::free(reinterpret_cast<void*>(address));
}

std::uint64_t Device::used_bytes() const {
    std::lock_guard lock(memory_mutex_);
    return allocated_ + static_cast<std::uint64_t>(std::max<std::int64_t>(hidden_, 0));
}

void Device::reserve_hidden(std::int64_t bytes) {
    std::lock_guard lock(memory_mutex_);
    hidden_ += bytes;
}

cudaError_t Device::allocate(void** ptr, std::uint64_t bytes, const void* pool) {
    context = true;
    if (ptr == nullptr) return record(cudaErrorInvalidValue, "allocation into a null pointer");
    *ptr = nullptr;
    if (bytes == 0) return cudaSuccess;
    {
        std::lock_guard lock(memory_mutex_);
        const std::uint64_t used = allocated_ + static_cast<std::uint64_t>(std::max<std::int64_t>(hidden_, 0));
        if (used + bytes > total_)
            return record(cudaErrorMemoryAllocation,
                          "out of emulated device memory: " + std::to_string(bytes) + " bytes requested, " +
                              std::to_string(total_ - std::min(used, total_)) + " free of " + std::to_string(total_));
    }
    void* p = nullptr;
    // 256-byte aligned like cudaMalloc, with the exact size so ASan sees overruns.
    if (posix_memalign(&p, 256, bytes) != 0) return record(cudaErrorMemoryAllocation, "host memory exhausted");
    std::lock_guard lock(memory_mutex_);
    allocations_[reinterpret_cast<std::uintptr_t>(p)] = Allocation{bytes, pool};
    allocated_ += bytes;
    *ptr = p;
    return cudaSuccess;
}

void Device::set_total(std::uint64_t bytes) {
    std::lock_guard lock(memory_mutex_);
    total_ = bytes;
}

cudaError_t Device::release(void* ptr, std::uint64_t* bytes, const void** pool) {
    if (ptr == nullptr) return cudaSuccess;
    std::lock_guard lock(memory_mutex_);
    const auto it = allocations_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == allocations_.end()) {
        std::lock_guard elock(error_mutex_);
        last_error_ = cudaErrorInvalidValue;
        detail_ = "free of a pointer that is not the start of a device allocation";
        return cudaErrorInvalidValue;
    }
    allocated_ -= it->second.bytes;
    if (bytes != nullptr) *bytes = it->second.bytes;
    if (pool != nullptr) *pool = it->second.pool;
    std::free(ptr);
    allocations_.erase(it);
    return cudaSuccess;
}

bool Device::is_device(const void* p, std::uint64_t bytes) const {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    {
        std::lock_guard lock(memory_mutex_);
        auto it = allocations_.upper_bound(address);
        if (it != allocations_.begin()) {
            --it;
            if (address + bytes <= it->first + it->second.bytes) return true;
        }
    }
    return virtual_memory().accessible(address, bytes);  // outside memory_mutex_: it charges pages under its own
}

cudaError_t Device::allocate_pinned(void** ptr, std::uint64_t bytes) {
    context = true;
    if (ptr == nullptr) return record(cudaErrorInvalidValue, "cudaHostAlloc into a null pointer");
    *ptr = nullptr;
    if (bytes == 0) return cudaSuccess;
    void* p = nullptr;
    if (posix_memalign(&p, 4096, bytes) != 0) return record(cudaErrorMemoryAllocation, "host memory exhausted");
    std::lock_guard lock(memory_mutex_);
    pinned_[reinterpret_cast<std::uintptr_t>(p)] = bytes;
    pinned_bytes_ += bytes;
    *ptr = p;
    return cudaSuccess;
}

cudaError_t Device::release_pinned(void* ptr) {
    if (ptr == nullptr) return cudaSuccess;
    std::lock_guard lock(memory_mutex_);
    const auto it = pinned_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == pinned_.end()) {
        std::lock_guard elock(error_mutex_);
        last_error_ = cudaErrorInvalidValue;
        detail_ = "cudaFreeHost of a pointer that is not the start of a cudaHostAlloc allocation";
        return cudaErrorInvalidValue;
    }
    pinned_bytes_ -= it->second;
    std::free(ptr);
    pinned_.erase(it);
    return cudaSuccess;
}

bool Device::is_pinned(const void* p, std::uint64_t bytes) const {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    std::lock_guard lock(memory_mutex_);
    auto it = pinned_.upper_bound(address);
    if (it == pinned_.begin()) return false;
    --it;
    return address + bytes <= it->first + it->second;
}

std::uint64_t Device::pinned_bytes() const {
    std::lock_guard lock(memory_mutex_);
    return pinned_bytes_;
}

bool Device::charge_pages(std::uint64_t bytes) {
    std::lock_guard lock(memory_mutex_);
    const std::uint64_t used = allocated_ + static_cast<std::uint64_t>(std::max<std::int64_t>(hidden_, 0));
    if (used + bytes > total_) return false;
    allocated_ += bytes;
    pages_ += bytes;
    return true;
}

void Device::refund_pages(std::uint64_t bytes) {
    std::lock_guard lock(memory_mutex_);
    allocated_ -= bytes;
    pages_ -= bytes;
}

std::uint64_t Device::pages_bytes() const {
    std::lock_guard lock(memory_mutex_);
    return pages_;
}

cudaError_t Device::record(cudaError_t status, const std::string& detail) {
    if (status == cudaSuccess) return status;
    std::lock_guard lock(error_mutex_);
    last_error_ = status;
    detail_ = detail;
    return status;
}

cudaError_t Device::peek_last_error() {
    std::lock_guard lock(error_mutex_);
    return last_error_;
}

cudaError_t Device::take_last_error() {
    std::lock_guard lock(error_mutex_);
    const cudaError_t e = last_error_;
    last_error_ = cudaSuccess;
    return e;
}

void Device::run_blocks(std::size_t runner) {
    const KernelLaunch& l = *current_;
    for (;;) {
        const std::uint64_t b = next_block_.fetch_add(1);
        if (b >= blocks_) return;
        const uint3 idx{static_cast<unsigned>(b % l.grid.x), static_cast<unsigned>((b / l.grid.x) % l.grid.y),
                        static_cast<unsigned>(b / (std::uint64_t{l.grid.x} * l.grid.y))};
        std::string error = runners_[runner]->run_block(l, idx);
        if (!error.empty()) {
            next_block_.store(blocks_);  // stop handing out blocks
            std::lock_guard lock(work_mutex_);
            if (launch_error_.empty())
                launch_error_ = "block (" + std::to_string(idx.x) + "," + std::to_string(idx.y) + "," +
                                std::to_string(idx.z) + "): " + error;
        }
    }
}

void Device::worker_main(std::size_t index) {
    std::uint64_t seen = 0;
    for (;;) {
        {
            std::unique_lock lock(work_mutex_);
            work_ready_.wait(lock, [&] { return stopping_ || job_ != seen; });
            if (stopping_) return;
            seen = job_;
        }
        run_blocks(index);
        {
            std::lock_guard lock(work_mutex_);
            --busy_;
        }
        work_done_.notify_all();
    }
}

void Device::run(const KernelLaunch& l) {
    context = true;
    const std::uint64_t threads = std::uint64_t{l.block.x} * l.block.y * l.block.z;
    const std::uint64_t blocks = std::uint64_t{l.grid.x} * l.grid.y * l.grid.z;
    if (threads == 0 || threads > 1024 || l.block.z > 64 || blocks == 0 || l.grid.y > 65535 || l.grid.z > 65535) {
        record(cudaErrorInvalidConfiguration, std::string(l.name) + ": invalid launch configuration");
        return;
    }
    if (l.shared_bytes != 0) {
        record(cudaErrorNotSupported, std::string(l.name) + ": dynamic shared memory is not emulated");
        return;
    }
    std::lock_guard launch_lock(launch_mutex_);
    current_ = &l;
    blocks_ = blocks;
    next_block_.store(0);
    launch_error_.clear();
    const bool parallel = blocks > 1 && !threads_.empty();
    if (parallel) {
        {
            std::lock_guard lock(work_mutex_);
            busy_ = threads_.size();
            ++job_;
        }
        work_ready_.notify_all();
    }
    run_blocks(0);
    if (parallel) {
        std::unique_lock lock(work_mutex_);
        work_done_.wait(lock, [&] { return busy_ == 0; });
    }
    current_ = nullptr;
    if (!launch_error_.empty()) record(cudaErrorLaunchFailure, std::string(l.name) + ": " + launch_error_);
}

Device& device() {
    static Device d;
    return d;
}

void launch(const KernelLaunch& l) { device().run(l); }

void set_device_memory(std::uint64_t total_bytes) { device().set_total(total_bytes); }
std::uint64_t device_memory_total() { return device().total_bytes(); }
std::uint64_t device_memory_used() { return device().used_bytes(); }

std::uint64_t pinned_host_bytes() { return device().pinned_bytes(); }
std::uint64_t device_pages_bytes() { return device().pages_bytes(); }
std::uint64_t device_page_bytes() { return virtual_memory().granularity(); }
bool context_created() { return device().context.load(); }
std::uint64_t matmul_calls() { return device().matmuls.load(); }
std::uint64_t memset_bytes() { return device().memset_bytes.load(); }
std::uint64_t graph_launches() { return device().graph_launches.load(); }
std::uint64_t held_work_ran() { return device().held_work_ran.load(); }
std::uint64_t matmul_calls_of_candidate(int i) { return i >= 0 && i < 4 ? device().matmuls_by_candidate[i].load() : 0; }
void forget_context() { device().context = false; }

}  // namespace tune_emu

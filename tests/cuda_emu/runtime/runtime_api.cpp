// The CUDA runtime API on the emulated device. Streams execute in order and
// at once (the enqueueing call does the work), which is one of the orders a
// GPU may run them in; races between such streams are therefore hidden. A
// stream made with a priority (tune's side streams) is deferred instead: it
// holds its work until something waits for it, the latest a GPU may run it,
// so a missing wait shows. A capturing stream records its work
// (tune_emu::record), and a graph launch runs the recording in order.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device.h"

struct CUstream_st {
    std::uint32_t magic = 0x5742ea11u;
    bool capturing = false, invalidated = false;
    std::vector<std::function<void()>> recorded;  // since cudaStreamBeginCapture
    bool deferred = false;                        // made with a priority: holds its work
    std::deque<std::function<void()>> held;       // given and not run yet
    std::uint64_t given = 0, ran = 0;             // pieces of work held in all, and run
};

struct CUgraph_st {
    std::vector<std::function<void()>> work;
};

struct CUgraphExec_st {
    std::vector<std::function<void()>> work;
};

struct CUevent_st {
    std::chrono::steady_clock::time_point at;
    bool recorded = false;
    cudaStream_t deferred = nullptr;  // recorded on a deferred stream: done once it has run
    std::uint64_t upto = 0;           // ... this many of its pieces of work
};

struct CUmemPoolHandle_st {
    std::mutex mutex;
    std::uint64_t used = 0, used_high = 0, reserved = 0, reserved_high = 0;
    std::uint64_t release_threshold = 0;
};

namespace {

using tune_emu::device;

constexpr std::uint64_t kPoolGranularity = 2ull << 20;  // a real pool maps memory in 2 MiB pieces

cudaError_t fail(cudaError_t status, const std::string& detail) { return device().record(status, detail); }

bool valid_stream(cudaStream_t s) { return s == nullptr || s->magic == 0x5742ea11u; }

bool any_capture() {
    std::lock_guard lock(device().capture_mutex);
    return !device().capturing.empty();
}

// `stream` no longer counts among the capturing ones.
void forget_capture(cudaStream_t stream) {
    std::lock_guard lock(device().capture_mutex);
    auto& all = device().capturing;
    all.erase(std::remove(all.begin(), all.end(), stream), all.end());
}

// A call a capture cannot hold (it waits for the device, or the emulator records no such work): it
// fails, and invalidates `stream`'s capture, or with none named every capture (global mode).
cudaError_t refuse_in_capture(cudaStream_t stream, const std::string& call) {
    std::lock_guard lock(device().capture_mutex);
    for (CUstream_st* s : device().capturing)
        if (stream == nullptr || s == stream) s->invalidated = true;
    return device().record(cudaErrorStreamCaptureUnsupported, call + " while a stream is capturing");
}

// Runs what deferred stream `s` holds, in order, until `upto` pieces have run. Errors the work
// records (a launch's, a copy's) surface here, as a GPU's asynchronous errors do at a wait.
cudaError_t run_held(cudaStream_t s, std::uint64_t upto) {
    bool any = false;
    while (s->ran < upto && !s->held.empty()) {
        const std::function<void()> work = std::move(s->held.front());
        s->held.pop_front();
        ++s->ran, any = true;
        work();
        ++device().held_work_ran;
    }
    return any ? device().peek_last_error() : cudaSuccess;
}

cudaError_t run_all_held(cudaStream_t s) { return s != nullptr && s->deferred ? run_held(s, s->given) : cudaSuccess; }

// Every deferred stream's held work, as a device-wide synchronisation runs it.
cudaError_t run_every_held() {
    std::vector<CUstream_st*> deferred;
    {
        std::lock_guard lock(device().capture_mutex);
        deferred = device().deferred;
    }
    for (CUstream_st* s : deferred)
        if (cudaError_t e = run_all_held(s); e != cudaSuccess) return e;
    return cudaSuccess;
}

cudaError_t check_device_range(const void* p, std::size_t bytes, const char* what) {
    if (bytes == 0) return cudaSuccess;
    if (!device().is_device(p, bytes))
        return fail(cudaErrorInvalidValue,
                    std::string(what) + ": [pointer, pointer + bytes) is not inside one device allocation");
    return cudaSuccess;
}

// cudaMemcpyDefault tells the sides apart by address; here each must be
// device memory or pinned host memory (what tune's backend promises), so a
// pageable pointer passed as "either side" fails here as it would be slow there.
cudaError_t check_default_side(const void* p, std::size_t bytes, const char* what) {
    if (device().is_device(p, bytes) || device().is_pinned(p, bytes)) return cudaSuccess;
    return fail(cudaErrorInvalidValue,
                std::string(what) + ": cudaMemcpyDefault on memory that is neither device nor pinned host memory");
}

// Copies with the direction checked: the device side must be device memory.
cudaError_t copy_now(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);

// Captured, a copy is checked now and made when the graph runs; its host side must be pinned (a GPU's
// graph cannot copy pageable memory) and the synchronous cudaMemcpy (stream null) is refused.
cudaError_t copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaMemcpyAsync: destroyed stream");
    if (stream == nullptr && any_capture()) return refuse_in_capture(nullptr, "cudaMemcpy");
    if (!tune_emu::holds(stream)) return copy_now(dst, src, bytes, kind);
    const bool host_dst = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost;
    const bool host_src = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost;
    const bool pageable =
        (host_dst && !device().is_pinned(dst, bytes)) || (host_src && !device().is_pinned(src, bytes));
    if (pageable && tune_emu::capturing(stream))
        return refuse_in_capture(stream, "cudaMemcpyAsync of pageable host memory");
    // A GPU copies pageable memory through staging before the call returns: held work first, then the copy.
    if (pageable) {
        if (cudaError_t e = run_all_held(stream); e != cudaSuccess) return e;
        return copy_now(dst, src, bytes, kind);
    }
    tune_emu::record(stream, [=] { copy_now(dst, src, bytes, kind); });
    return cudaSuccess;
}

cudaError_t copy_now(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0) return cudaSuccess;
    if (kind == cudaMemcpyDefault) {
        if (cudaError_t e = check_default_side(dst, bytes, "cudaMemcpy destination"); e != cudaSuccess) return e;
        if (cudaError_t e = check_default_side(src, bytes, "cudaMemcpy source"); e != cudaSuccess) return e;
        std::memmove(dst, src, bytes);
        return cudaSuccess;
    }
    const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (dst_device) {
        if (cudaError_t e = check_device_range(dst, bytes, "cudaMemcpy destination"); e != cudaSuccess) return e;
    }
    if (src_device) {
        if (cudaError_t e = check_device_range(src, bytes, "cudaMemcpy source"); e != cudaSuccess) return e;
    }
    std::memmove(dst, src, bytes);
    return cudaSuccess;
}

std::string& message_buffer() {
    thread_local std::string buffer;
    return buffer;
}

}  // namespace

cudaError_t cudaGetLastError() { return device().take_last_error(); }

cudaError_t cudaPeekAtLastError() {
    const cudaError_t e = device().take_last_error();
    device().record(e, device().detail());
    return e;
}

const char* cudaGetErrorName(cudaError_t error) {
    switch (error) {
        case cudaSuccess:
            return "cudaSuccess";
        case cudaErrorInvalidValue:
            return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation:
            return "cudaErrorMemoryAllocation";
        case cudaErrorInitializationError:
            return "cudaErrorInitializationError";
        case cudaErrorInvalidConfiguration:
            return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidDevice:
            return "cudaErrorInvalidDevice";
        case cudaErrorInvalidResourceHandle:
            return "cudaErrorInvalidResourceHandle";
        case cudaErrorNotReady:
            return "cudaErrorNotReady";
        case cudaErrorLaunchFailure:
            return "cudaErrorLaunchFailure";
        case cudaErrorNotSupported:
            return "cudaErrorNotSupported";
        case cudaErrorIllegalState:
            return "cudaErrorIllegalState";
        case cudaErrorStreamCaptureUnsupported:
            return "cudaErrorStreamCaptureUnsupported";
        case cudaErrorStreamCaptureInvalidated:
            return "cudaErrorStreamCaptureInvalidated";
        case cudaErrorUnknown:
            return "cudaErrorUnknown";
    }
    return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
    const char* base = "unknown error";
    switch (error) {
        case cudaSuccess:
            return "no error";
        case cudaErrorInvalidValue:
            base = "invalid argument";
            break;
        case cudaErrorMemoryAllocation:
            base = "out of memory";
            break;
        case cudaErrorInitializationError:
            base = "initialization error";
            break;
        case cudaErrorInvalidConfiguration:
            base = "invalid configuration argument";
            break;
        case cudaErrorInvalidDevice:
            base = "invalid device ordinal";
            break;
        case cudaErrorInvalidResourceHandle:
            base = "invalid resource handle";
            break;
        case cudaErrorNotReady:
            base = "device not ready";
            break;
        case cudaErrorLaunchFailure:
            base = "unspecified launch failure";
            break;
        case cudaErrorNotSupported:
            base = "operation not supported";
            break;
        case cudaErrorIllegalState:
            base = "the operation is not permitted in this state";
            break;
        case cudaErrorStreamCaptureUnsupported:
            base = "operation not permitted when stream is capturing";
            break;
        case cudaErrorStreamCaptureInvalidated:
            base = "operation failed due to a previous error during capture";
            break;
        case cudaErrorUnknown:
            break;
    }
    // The emulator knows why; say it (the detail of the most recent error).
    message_buffer() = std::string(base) + " [emulated device: " + device().detail() + "]";
    return message_buffer().c_str();
}

cudaError_t cudaRuntimeGetVersion(int* version) {
    *version = 13000;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
    *version = 13000;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* count) {
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int dev) {
    if (dev != 0) return fail(cudaErrorInvalidDevice, "the emulator has device 0 only");
    *prop = cudaDeviceProp{};
    std::strncpy(prop->name, "tune emulated device", sizeof prop->name - 1);
    prop->totalGlobalMem = device().total_bytes();
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = device().workers();
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int length, int dev) {
    if (dev != 0) return fail(cudaErrorInvalidDevice, "the emulator has device 0 only");
    std::strncpy(bus_id, "0000:00:00.0", static_cast<std::size_t>(length));
    if (length > 0) bus_id[length - 1] = '\0';
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int dev) {
    device().context = true;  // CUDA 12+: creates the primary context
    if (dev != 0) return fail(cudaErrorInvalidDevice, "the emulator has device 0 only");
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int* dev) {
    *dev = 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
    if (any_capture()) return refuse_in_capture(nullptr, "cudaDeviceSynchronize");
    return run_every_held();
}

cudaError_t cudaDeviceReset() {
    device().context = false;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
    device().context = true;
    const std::uint64_t total = device().total_bytes(), used = device().used_bytes();
    *free_bytes = used < total ? total - used : 0;
    *total_bytes = total;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) { return device().allocate(ptr, bytes, nullptr); }

cudaError_t cudaFree(void* ptr) {
    device().context = true;  // cudaFree(nullptr) is the idiom that creates it
    // cudaFree synchronizes the device: what deferred streams hold runs first.
    if (cudaError_t e = run_every_held(); e != cudaSuccess) return e;
    return device().release(ptr);
}

cudaError_t cudaHostAlloc(void** ptr, std::size_t bytes, unsigned) { return device().allocate_pinned(ptr, bytes); }

cudaError_t cudaMallocHost(void** ptr, std::size_t bytes) { return device().allocate_pinned(ptr, bytes); }

cudaError_t cudaFreeHost(void* ptr) { return device().release_pinned(ptr); }

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
    *attributes = cudaPointerAttributes{};
    if (device().is_device(ptr)) {
        attributes->type = cudaMemoryTypeDevice;
        attributes->devicePointer = const_cast<void*>(ptr);
    } else if (device().is_pinned(ptr)) {  // mapped: the same address on both sides (unified addressing)
        attributes->type = cudaMemoryTypeHost;
        attributes->devicePointer = const_cast<void*>(ptr);
        attributes->hostPointer = const_cast<void*>(ptr);
    }
    return cudaSuccess;
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props) {
    if (props == nullptr || props->location.type != cudaMemLocationTypeDevice || props->location.id != 0 ||
        props->allocType != cudaMemAllocationTypePinned)
        return fail(cudaErrorInvalidValue, "cudaMemPoolCreate: pinned device-0 pools only");
    *pool = new CUmemPoolHandle_st;
    return cudaSuccess;
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
    delete pool;
    return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
    std::uint64_t v = 0;
    std::memcpy(&v, value, sizeof v);
    std::lock_guard lock(pool->mutex);
    switch (attr) {
        case cudaMemPoolAttrReleaseThreshold:
            pool->release_threshold = v;
            return cudaSuccess;
        // High-water marks can only be reset (to the current value), as in CUDA.
        case cudaMemPoolAttrReservedMemHigh:
            if (v != 0) break;
            pool->reserved_high = pool->reserved;
            return cudaSuccess;
        case cudaMemPoolAttrUsedMemHigh:
            if (v != 0) break;
            pool->used_high = pool->used;
            return cudaSuccess;
        default:
            break;
    }
    return fail(cudaErrorInvalidValue, "pool attribute not settable (or to that value)");
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
    std::lock_guard lock(pool->mutex);
    std::uint64_t v = 0;
    switch (attr) {
        case cudaMemPoolAttrReleaseThreshold:
            v = pool->release_threshold;
            break;
        case cudaMemPoolAttrReservedMemCurrent:
            v = pool->reserved;
            break;
        case cudaMemPoolAttrReservedMemHigh:
            v = pool->reserved_high;
            break;
        case cudaMemPoolAttrUsedMemCurrent:
            v = pool->used;
            break;
        case cudaMemPoolAttrUsedMemHigh:
            v = pool->used_high;
            break;
        default:
            return fail(cudaErrorNotSupported, "pool attribute not emulated");
    }
    std::memcpy(value, &v, sizeof v);
    return cudaSuccess;
}

// The pool's reserve follows its use in 2 MiB steps and, with a release
// threshold of "never" (tune's), never shrinks.
cudaError_t cudaMallocFromPoolAsync(void** ptr, std::size_t bytes, cudaMemPool_t pool, cudaStream_t stream) {
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaMallocFromPoolAsync: bad stream");
    if (tune_emu::capturing(stream))
        return refuse_in_capture(stream, "cudaMallocFromPoolAsync (no allocation nodes here)");
    if (cudaError_t e = device().allocate(ptr, bytes, pool); e != cudaSuccess) return e;
    std::lock_guard lock(pool->mutex);
    pool->used += bytes;
    pool->used_high = std::max(pool->used_high, pool->used);
    const std::uint64_t needed = (pool->used + kPoolGranularity - 1) / kPoolGranularity * kPoolGranularity;
    if (needed > pool->reserved)
        pool->reserved = needed;
    else if (pool->release_threshold < pool->reserved && needed < pool->reserved)
        pool->reserved = std::max(needed, pool->release_threshold);
    pool->reserved_high = std::max(pool->reserved_high, pool->reserved);
    return cudaSuccess;
}

// What the pool keeps beyond its use, down to `keep`, goes back (a pool's reserve is whole 2 MiB pieces).
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, std::size_t keep) {
    std::lock_guard lock(pool->mutex);
    const std::uint64_t needed = (pool->used + kPoolGranularity - 1) / kPoolGranularity * kPoolGranularity;
    pool->reserved = std::min(pool->reserved, std::max<std::uint64_t>(needed, keep));
    return cudaSuccess;
}

cudaError_t cudaMallocAsync(void** ptr, std::size_t bytes, cudaStream_t stream) {
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaMallocAsync: bad stream");
    if (tune_emu::capturing(stream)) return refuse_in_capture(stream, "cudaMallocAsync (no allocation nodes here)");
    return device().allocate(ptr, bytes, nullptr);
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaFreeAsync: bad stream");
    if (tune_emu::capturing(stream)) return refuse_in_capture(stream, "cudaFreeAsync (no allocation nodes here)");
    if (cudaError_t e = run_all_held(stream); e != cudaSuccess) return e;  // what it held may read the memory
    std::uint64_t bytes = 0;
    const void* owner = nullptr;
    if (cudaError_t e = device().release(ptr, &bytes, &owner); e != cudaSuccess) return e;
    if (owner != nullptr) {
        auto* pool = static_cast<CUmemPoolHandle_st*>(const_cast<void*>(owner));
        std::lock_guard lock(pool->mutex);
        pool->used -= bytes;
    }
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    return copy(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
    return copy(dst, src, bytes, kind, stream);
}

cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t stream) {
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaMemsetAsync: bad stream");
    if (cudaError_t e = check_device_range(dst, bytes, "cudaMemsetAsync"); e != cudaSuccess) return e;
    const auto set = [=] {
        if (bytes > 0) std::memset(dst, value, bytes);
        device().memset_bytes += bytes;
    };
    if (tune_emu::holds(stream))
        tune_emu::record(stream, set);
    else
        set();
    return cudaSuccess;
}

cudaError_t cudaMemcpyToSymbolBytes(void* symbol, const void* src, std::size_t bytes, std::size_t offset) {
    std::memcpy(static_cast<char*>(symbol) + offset, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
    device().context = true;
    *stream = new CUstream_st;
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) { return cudaStreamCreate(stream); }

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned flags, int priority) {
    int least = 0, greatest = 0;
    cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (priority > least || priority < greatest)
        return fail(cudaErrorInvalidValue, "cudaStreamCreateWithPriority: priority outside the device's range");
    if (cudaError_t e = cudaStreamCreateWithFlags(stream, flags); e != cudaSuccess) return e;
    (*stream)->deferred = true;
    std::lock_guard lock(device().capture_mutex);
    device().deferred.push_back(*stream);
    return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
    *least = 0, *greatest = -5;  // a Hopper's range
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: bad stream");
    if (event == nullptr) return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: null event");
    if (tune_emu::capturing(stream)) return refuse_in_capture(stream, "cudaStreamWaitEvent (no event nodes here)");
    // Every stream but a deferred one is done with what it was given, so only the event's own may be behind.
    return event->deferred != nullptr ? run_held(event->deferred, event->upto) : cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    if (stream == nullptr || !valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "bad stream");
    const cudaError_t held = run_all_held(stream);  // a GPU finishes a destroyed stream's work
    {
        std::lock_guard lock(device().capture_mutex);
        auto& all = device().deferred;
        all.erase(std::remove(all.begin(), all.end(), stream), all.end());
    }
    forget_capture(stream);
    stream->magic = 0;
    delete stream;
    return held;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize: bad stream");
    if (tune_emu::capturing(stream) || (stream == nullptr && any_capture()))
        return refuse_in_capture(stream, "cudaStreamSynchronize");
    return run_all_held(stream);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamBeginCapture: bad stream");
    if (stream == nullptr) return fail(cudaErrorStreamCaptureUnsupported, "the legacy stream cannot be captured");
    // Thread-local mode is held to global's rule: a call of any thread that waits breaks the capture.
    if (mode == cudaStreamCaptureModeRelaxed)
        return fail(cudaErrorNotSupported, "the emulator captures in global or thread-local mode only");
    if (stream->capturing) return fail(cudaErrorIllegalState, "cudaStreamBeginCapture: the stream is capturing");
    std::lock_guard lock(device().capture_mutex);
    stream->capturing = true, stream->invalidated = false;
    stream->recorded.clear();
    device().capturing.push_back(stream);
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
    if (!valid_stream(stream) || stream == nullptr)
        return fail(cudaErrorInvalidResourceHandle, "cudaStreamEndCapture: bad stream");
    if (!stream->capturing) return fail(cudaErrorIllegalState, "cudaStreamEndCapture: the stream is not capturing");
    forget_capture(stream);
    stream->capturing = false;
    *graph = nullptr;
    if (stream->invalidated)
        return fail(cudaErrorStreamCaptureInvalidated, "cudaStreamEndCapture: a call during capture invalidated it");
    *graph = new CUgraph_st{std::move(stream->recorded)};
    stream->recorded.clear();
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamIsCapturing: bad stream");
    const bool on = stream != nullptr && stream->capturing;
    *status = !on                   ? cudaStreamCaptureStatusNone
              : stream->invalidated ? cudaStreamCaptureStatusInvalidated
                                    : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
    if (graph == nullptr) return fail(cudaErrorInvalidValue, "cudaGraphInstantiate: null graph");
    *exec = new CUgraphExec_st{graph->work};
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaGraphLaunch: bad stream");
    if (exec == nullptr) return fail(cudaErrorInvalidValue, "cudaGraphLaunch: null graph");
    if (tune_emu::capturing(stream)) return refuse_in_capture(stream, "cudaGraphLaunch (no child graphs here)");
    if (cudaError_t e = run_all_held(stream); e != cudaSuccess) return e;  // the graph runs behind it
    for (const auto& work : exec->work) work();
    ++device().graph_launches;
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    delete exec;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    delete graph;
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) { return cudaStreamSynchronize(stream); }

cudaError_t cudaStreamGetDevice(cudaStream_t stream, int* dev) {
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamGetDevice: bad stream");
    *dev = 0;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
    device().context = true;
    *event = new CUevent_st;
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) { return cudaEventCreate(event); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: bad stream");
    if (tune_emu::capturing(stream)) return refuse_in_capture(stream, "cudaEventRecord (no event nodes here)");
    event->at = std::chrono::steady_clock::now();
    event->recorded = true;
    const bool behind = stream != nullptr && stream->deferred;
    event->deferred = behind ? stream : nullptr;
    event->upto = behind ? stream->given : 0;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    if (any_capture()) return refuse_in_capture(nullptr, "cudaEventSynchronize");
    return event != nullptr && event->deferred != nullptr ? run_held(event->deferred, event->upto) : cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop) {
    if (!start->recorded || !stop->recorded)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was never recorded");
    *ms = std::chrono::duration<float, std::milli>(stop->at - start->at).count();
    return cudaSuccess;
}

namespace tune_emu {

bool capturing(cudaStream_t stream) { return stream != nullptr && valid_stream(stream) && stream->capturing; }

bool holds(cudaStream_t stream) { return capturing(stream) || (stream != nullptr && stream->deferred); }

void record(cudaStream_t stream, std::function<void()> work) {
    if (stream->capturing) {
        stream->recorded.push_back(std::move(work));
        return;
    }
    stream->held.push_back(std::move(work));
    ++stream->given;
}

void drain(cudaStream_t stream) { run_all_held(stream); }

}  // namespace tune_emu

// For a library a test loads with dlopen and which cannot link this runtime
// (tests/cudnn_standin): its work for `stream` joins the stream's capture, as
// the runtime's own calls do, and runs at each launch of the graph (or, on a
// deferred stream, once something waits for it). Returns 1 when recorded
// (`context` is then released with the work), 0 when the stream holds nothing
// (the library runs the work itself). The test executables
// export it (ENABLE_EXPORTS); the library finds it with dlsym.
extern "C" __attribute__((visibility("default"))) int tune_emu_record_if_capturing(void* stream, void (*run)(void*),
                                                                                   void* context,
                                                                                   void (*release)(void*)) {
    const auto s = static_cast<cudaStream_t>(stream);
    if (!tune_emu::holds(s)) return 0;
    const std::shared_ptr<void> owned(context, release);
    tune_emu::record(s, [run, owned] { run(owned.get()); });
    return 1;
}

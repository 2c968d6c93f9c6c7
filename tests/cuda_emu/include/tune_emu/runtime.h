// The part of the CUDA runtime API tune uses, served by the emulated device
// (tests/cuda_emu/runtime). Names, enumerator values and signatures follow
// CUDA 13's cuda_runtime_api.h so the sources compile unchanged; only what
// tune calls exists, so a new call fails to compile here instead of
// silently running untested.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tune_emu/device_code.h"

enum cudaError_t : int {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorIllegalState = 401,
    cudaErrorNotReady = 600,
    cudaErrorLaunchFailure = 719,
    cudaErrorNotSupported = 801,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorUnknown = 999,
};
using cudaError = cudaError_t;

enum cudaMemcpyKind : int {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

enum cudaMemoryType : int {
    cudaMemoryTypeUnregistered = 0,
    cudaMemoryTypeHost = 1,
    cudaMemoryTypeDevice = 2,
    cudaMemoryTypeManaged = 3,
};

struct cudaPointerAttributes {
    cudaMemoryType type = cudaMemoryTypeUnregistered;
    int device = 0;
    void* devicePointer = nullptr;
    void* hostPointer = nullptr;
};

struct cudaDeviceProp {
    char name[256] = {};
    std::size_t totalGlobalMem = 0;
    int major = 0, minor = 0;
    int multiProcessorCount = 0;
};

constexpr unsigned cudaStreamDefault = 0x0;
constexpr unsigned cudaStreamNonBlocking = 0x1;

struct CUevent_st;
using cudaEvent_t = CUevent_st*;

// Stream capture into graphs: what a capturing stream is given is recorded, not run, and a graph
// launch runs it all in order. The emulator records kernels, copies and memsets (and cuBLASLt's
// matmuls); whatever must wait for the device (synchronizing, reading an event) invalidates the
// capture, as on a GPU. Thread-local mode is held to global mode's rule (every thread's calls).
struct CUgraph_st;
using cudaGraph_t = CUgraph_st*;
struct CUgraphExec_st;
using cudaGraphExec_t = CUgraphExec_st*;
enum cudaStreamCaptureMode : int {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus : int {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2,
};

enum cudaMemAllocationType : int { cudaMemAllocationTypeInvalid = 0, cudaMemAllocationTypePinned = 1 };
enum cudaMemLocationType : int { cudaMemLocationTypeInvalid = 0, cudaMemLocationTypeDevice = 1 };
struct cudaMemLocation {
    cudaMemLocationType type = cudaMemLocationTypeInvalid;
    int id = 0;
};
struct cudaMemPoolProps {
    cudaMemAllocationType allocType = cudaMemAllocationTypeInvalid;
    int handleTypes = 0;
    cudaMemLocation location;
};
enum cudaMemPoolAttr : int {
    cudaMemPoolReuseFollowEventDependencies = 0x1,
    cudaMemPoolReuseAllowOpportunistic = 0x2,
    cudaMemPoolReuseAllowInternalDependencies = 0x3,
    cudaMemPoolAttrReleaseThreshold = 0x4,
    cudaMemPoolAttrReservedMemCurrent = 0x5,
    cudaMemPoolAttrReservedMemHigh = 0x6,
    cudaMemPoolAttrUsedMemCurrent = 0x7,
    cudaMemPoolAttrUsedMemHigh = 0x8,
};
struct CUmemPoolHandle_st;
using cudaMemPool_t = CUmemPoolHandle_st*;

enum cudaDriverEntryPointQueryResult : int {
    cudaDriverEntryPointSuccess = 0,
    cudaDriverEntryPointSymbolNotFound = 1,
    cudaDriverEntryPointVersionNotSufficent = 2,
};
constexpr unsigned long long cudaEnableDefault = 0x0;

cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);

cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int length, int device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaDeviceSynchronize();
// Ends the primary context (context_created() turns false); the emulator keeps its memory.
cudaError_t cudaDeviceReset();
cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes);

cudaError_t cudaMalloc(void** ptr, std::size_t bytes);
template <class T>
cudaError_t cudaMalloc(T** ptr, std::size_t bytes) {
    return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
cudaError_t cudaFree(void* ptr);
// Pinned host memory: host memory apart from the device's, which cudaMemcpyDefault may name.
constexpr unsigned cudaHostAllocDefault = 0, cudaHostAllocPortable = 1, cudaHostAllocMapped = 2;
cudaError_t cudaHostAlloc(void** ptr, std::size_t bytes, unsigned flags);
cudaError_t cudaMallocHost(void** ptr, std::size_t bytes);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr);

cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props);
cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value);
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value);
cudaError_t cudaMallocFromPoolAsync(void** ptr, std::size_t bytes, cudaMemPool_t pool, cudaStream_t stream);
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, std::size_t minBytesToKeep);
cudaError_t cudaMallocAsync(void** ptr, std::size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream);

// The driver calls of tests/cuda_emu/include/cuda.h (the emulator serves cuMem* only).
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** function, unsigned int cuda_version,
                                             unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* status = nullptr);

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaMemcpyToSymbolBytes(void* symbol, const void* src, std::size_t bytes, std::size_t offset);
template <class T>
cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, std::size_t bytes, std::size_t offset = 0,
                               cudaMemcpyKind = cudaMemcpyHostToDevice) {
    if (offset + bytes > sizeof(T)) return cudaErrorInvalidValue;
    return cudaMemcpyToSymbolBytes(const_cast<T*>(&symbol), src, bytes, offset);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
// A stream made with a priority is deferred: it holds its kernels, copies, memsets and matmuls
// until something waits for it (an event it recorded, a synchronisation, a call that must see
// its work done), then runs them in order. tune makes its side streams so (Backend::beside), and
// a missing wait shows here as work run late, on memory already freed or rewritten.
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned flags, int priority);
cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamGetDevice(cudaStream_t stream, int* device);

cudaError_t cudaEventCreate(cudaEvent_t* event);
constexpr unsigned cudaEventDefault = 0x0;
constexpr unsigned cudaEventDisableTiming = 0x2;
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop);

// Emulator controls (tests only): the device total, and what it holds now.
namespace tune_emu {
void set_device_memory(std::uint64_t total_bytes);
std::uint64_t device_memory_total();
// Bytes held now (cudaMemGetInfo's total - free), and of them the driver pages (cuMemCreate) alive.
std::uint64_t device_memory_used();
// Bytes of pinned host memory (cudaHostAlloc) live now: none of it counts in device_memory_used().
std::uint64_t pinned_host_bytes();
std::uint64_t device_pages_bytes();
// cuMemGetAllocationGranularity's answer: TUNE_EMU_PAGE_BYTES, default 64 KiB (a real
// GPU's is 2 MiB; smaller here so the small models of the tests take device pages too).
std::uint64_t device_page_bytes();
// Whether a call that creates (or needs) the primary context has been made
// since forget_context(): cudaSetDevice, memory, streams, events, kernels.
bool context_created();
void forget_context();
// cublasLtMatmul calls that ran since the process started (GEMM tuning's timed runs among them).
std::uint64_t matmul_calls();
// The same for one of the heuristic's candidates (index 0 to 3: the emulator offers 3).
std::uint64_t matmul_calls_of_candidate(int i);
// Bytes cudaMemsetAsync has written since the process started.
std::uint64_t memset_bytes();
// cudaGraphLaunch calls since the process started.
std::uint64_t graph_launches();
// Pieces of work deferred streams held and then ran, since the process started.
std::uint64_t held_work_ran();
}  // namespace tune_emu

// The part of the CUDA driver API tune calls, served by the emulated device:
// virtual memory management (cuMem*), reached through
// cudaGetDriverEntryPointByVersion as on a real system. Names, enumerator
// values and struct layouts follow CUDA 13's cuda.h; only what tune uses exists.
#pragma once

#include <cstddef>

enum CUresult : int {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_SUPPORTED = 801,
};

using CUdeviceptr = unsigned long long;
using CUmemGenericAllocationHandle = unsigned long long;

enum CUmemAllocationType : int { CU_MEM_ALLOCATION_TYPE_INVALID = 0x0, CU_MEM_ALLOCATION_TYPE_PINNED = 0x1 };
enum CUmemAllocationHandleType : int { CU_MEM_HANDLE_TYPE_NONE = 0x0 };
enum CUmemLocationType : int { CU_MEM_LOCATION_TYPE_INVALID = 0x0, CU_MEM_LOCATION_TYPE_DEVICE = 0x1 };
enum CUmemAccess_flags : int {
    CU_MEM_ACCESS_FLAGS_PROT_NONE = 0x0,
    CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1,
    CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
};
enum CUmemAllocationGranularity_flags : int {
    CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0,
    CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1,
};

struct CUmemLocation {
    CUmemLocationType type;
    int id;
};

struct CUmemAllocationProp {
    CUmemAllocationType type;
    CUmemAllocationHandleType requestedHandleTypes;
    CUmemLocation location;
    void* win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
};

struct CUmemAccessDesc {
    CUmemLocation location;
    CUmemAccess_flags flags;
};

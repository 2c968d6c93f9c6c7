// Argument errors only a kernel can see (a token id outside the vocabulary,
// a target outside the logits) cannot throw where they happen. Kernels
// record the first one in a small device record; the backend reads it at
// its next synchronisation and raises BackendError there.
#pragma once

#include <cstdint>

namespace tune::kernels::cuda {

enum class DeviceErrorCode : std::int32_t { none = 0, token_out_of_range = 1, target_out_of_range = 2 };

struct DeviceErrorRecord {
    std::int32_t code;   // DeviceErrorCode; the first error wins
    std::int32_t value;  // the offending id
    std::int64_t index;  // where it was
    std::int64_t limit;  // the vocabulary it had to be below
};

#if defined(__CUDACC__) || defined(TUNE_CUDA_EMU)
__device__ __forceinline__ void report_device_error(DeviceErrorRecord* record, DeviceErrorCode code, std::int32_t value,
                                                    std::int64_t index, std::int64_t limit) {
    if (atomicCAS(&record->code, 0, static_cast<std::int32_t>(code)) == 0) {
        record->value = value;
        record->index = index;
        record->limit = limit;
    }
}
#endif

}  // namespace tune::kernels::cuda

// One cuDNN backend descriptor, owned: created from the loaded library's
// table, given typed attributes, finalized, destroyed with its owner. Each
// setter passes the attribute type its C element type has, so a wrong type
// is a compile error here instead of CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE on
// a GPU. A failed call throws CallError (library cudnn) naming the call, the
// attribute, the status with cuDNN's text, and the caller's file and line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/host/call_error.h"
#include "kernels/cuda/host/cudnn_enums.h"
#include "kernels/cuda/host/cudnn_library.h"

namespace tune::kernels::cuda::cudnn {

// A line of our source, for errors (C++17, which the emulated device's build
// uses: GCC's and Clang's builtins stand in for std::source_location).
struct SourceLine {
    const char* file = "";
    int line = 0;
    static SourceLine here(const char* file = __builtin_FILE(), int line = __builtin_LINE()) { return {file, line}; }
};

// Throws CallError for a status other than success: `call` is the function
// (a literal), `detail` what it was given (the descriptor type, the attribute).
void check(const CudnnApi& api, int status, const char* call, const std::string& detail,
           SourceLine where = SourceLine::here());

// `where` defaults to the line that makes it; through emplace_back, pass
// SourceLine::here() or the standard library's line is named.
class Descriptor {
public:
    Descriptor(const CudnnApi& api, DescriptorType type, SourceLine where = SourceLine::here());
    ~Descriptor();
    Descriptor(Descriptor&& other) noexcept;
    Descriptor& operator=(Descriptor&& other) noexcept;
    Descriptor(const Descriptor&) = delete;
    Descriptor& operator=(const Descriptor&) = delete;

    void* get() const { return raw_; }
    const CudnnApi* api() const { return api_; }

    Descriptor& set(Attribute name, std::int64_t value);
    Descriptor& set(Attribute name, const std::vector<std::int64_t>& values);
    Descriptor& set(Attribute name, bool value);
    Descriptor& set(Attribute name, DataType value);
    Descriptor& set(Attribute name, PointwiseMode value);
    Descriptor& set(Attribute name, ReductionOperator value);
    Descriptor& set(Attribute name, HeuristicMode value);
    Descriptor& set(Attribute name, TensorReordering value);
    Descriptor& set(Attribute name, const Descriptor& value);
    Descriptor& set(Attribute name, const std::vector<void*>& descriptors);
    Descriptor& set_handle(Attribute name, void* handle);
    Descriptor& set_pointers(Attribute name, const std::vector<void*>& pointers);
    Descriptor& set_pointer(Attribute name, void* pointer);

    // The raw status of finalize, for callers that fall back on NOT_SUPPORTED.
    int try_finalize();
    Descriptor& finalize();

    // One INT64 attribute the library computed (a plan's workspace size).
    std::int64_t get_int64(Attribute name) const;
    // Descriptors the library fills (a heuristic's engine configurations, made
    // by the caller): how many it filled.
    std::int64_t get_descriptors(Attribute name, std::vector<void*>& out) const;

private:
    Descriptor& set_raw(Attribute name, AttributeType type, std::int64_t count, const void* elements);
    Descriptor& set_enum(Attribute name, AttributeType type, int value);

    const CudnnApi* api_ = nullptr;
    DescriptorType type_ = DescriptorType::tensor;
    void* raw_ = nullptr;
    SourceLine where_;  // where the owner made it: failures name that line
};

}  // namespace tune::kernels::cuda::cudnn

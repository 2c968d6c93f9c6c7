// `tune selftest`: every backend op on random inputs of several shapes, run
// on a reference backend (the CPU) and a candidate (CUDA), outputs compared
// with per-dtype tolerances. Written against kernels::Backend only, so any
// two backends can be compared (the tests run it CPU against CPU).
//
// A case is data, not code paths: host tensors (inputs and outputs) plus a
// function that runs the op on one backend's copies of them. A later case
// kind (a few training steps through the trainer, comparing losses) fits
// the same shape: its run() drives the trainer and writes losses into an
// output tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/compare.h"
#include "kernels/selftest/tolerance.h"

namespace tune::kernels::selftest {

// One buffer of a case. Inputs and outputs alike are uploaded (so ops that
// accumulate start from known contents); outputs are read back and compared.
struct HostTensor {
    std::string name;
    DType dtype = DType::f32;
    std::vector<unsigned char> bytes;
    bool output = false;
    OpClass op_class = OpClass::exact;  // how an output is judged (its dtype picks the column)

    std::int64_t elements() const { return static_cast<std::int64_t>(bytes.size() / dtype_bytes(dtype)); }
};

// One backend's device copies of a case's tensors, plus any workspaces the
// op asks for; everything is freed when it goes out of scope.
class DeviceTensors {
public:
    DeviceTensors(Backend& backend, const std::vector<HostTensor>& tensors);
    ~DeviceTensors();
    DeviceTensors(const DeviceTensors&) = delete;
    DeviceTensors& operator=(const DeviceTensors&) = delete;

    void* operator[](std::size_t i) const { return pointers_.at(i); }
    template <class T>
    T* as(std::size_t i) const {
        return static_cast<T*>(pointers_.at(i));
    }
    // A fresh workspace of at least `bytes` (none when 0).
    Workspace workspace(std::uint64_t bytes);
    Backend& backend() const { return backend_; }

private:
    Backend& backend_;
    std::vector<void*> pointers_;
    std::vector<std::uint64_t> sizes_;
};

// What a case needs once it is generated: tensors and the op invocation.
struct CaseData {
    std::vector<HostTensor> tensors;
    std::function<void(Backend&, DeviceTensors&)> run;
};

struct Case {
    std::string op;     // "rmsnorm_forward"
    std::string dtype;  // "bf16", or "f32/bf16" when types mix
    std::string shape;  // "N=64 C=96"
    std::function<CaseData(std::uint64_t seed)> make;
    // The Backend ops (kernels/backend.h's kBackendOps) the case checks when
    // they are several; empty: `op` alone.
    std::vector<std::string> checks{};

    std::vector<std::string> checked_ops() const { return checks.empty() ? std::vector<std::string>{op} : checks; }
};

enum class Status { pass, fail, error, skipped };
std::string_view status_name(Status s);

// How one output compared.
struct OutputResult {
    std::string name;
    DType dtype = DType::f32;
    OpClass op_class = OpClass::exact;
    ErrorStats stats;
    Tolerance tolerance;
    bool pass = false;
};

struct CaseResult {
    std::string op, dtype, shape;
    Status status = Status::skipped;
    std::string message;  // the error, or why it was skipped
    std::vector<OutputResult> outputs;

    // The output furthest from its tolerance (nullptr when none ran).
    const OutputResult* worst() const;
};

// Compares the read-back outputs of the two backends (u8 and i32 as numbers).
std::vector<OutputResult> compare_outputs(const std::vector<HostTensor>& reference,
                                          const std::vector<HostTensor>& candidate);

// Runs one case on both backends and judges it; a backend error becomes
// Status::error with its message, never an exception.
CaseResult run_case(const Case& c, Backend& reference, Backend& candidate, std::uint64_t seed);

CaseResult skipped_case(const Case& c, const std::string& why);

// The standard list: every op of kernels/backend.h, several shapes, f32, bf16, f16.
std::vector<Case> standard_cases();

// Cases whose op, or one of the ops they check, contains `filter` (all when empty).
std::vector<Case> filter_cases(std::vector<Case> cases, const std::string& filter);

}  // namespace tune::kernels::selftest

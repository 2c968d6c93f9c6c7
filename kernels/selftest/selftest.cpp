// Running a self-test case on two backends and judging the outputs.
#include "kernels/selftest/selftest.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include "kernels/error.h"

namespace tune::kernels::selftest {

std::string_view status_name(Status s) {
    switch (s) {
        case Status::pass:
            return "pass";
        case Status::fail:
            return "FAIL";
        case Status::error:
            return "ERROR";
        case Status::skipped:
            return "skipped";
    }
    return "?";
}

DeviceTensors::DeviceTensors(Backend& backend, const std::vector<HostTensor>& tensors) : backend_(backend) {
    for (const HostTensor& t : tensors) {
        const std::uint64_t bytes = t.bytes.size();
        void* p = backend_.allocate(bytes);
        pointers_.push_back(p);
        sizes_.push_back(bytes);
        backend_.copy_to_device(p, t.bytes.data(), bytes);
    }
}

DeviceTensors::~DeviceTensors() {
    for (std::size_t i = 0; i < pointers_.size(); ++i) backend_.deallocate(pointers_[i], sizes_[i]);
}

Workspace DeviceTensors::workspace(std::uint64_t bytes) {
    if (bytes == 0) return {};
    void* p = backend_.allocate(bytes);
    pointers_.push_back(p);
    sizes_.push_back(bytes);
    return {p, bytes};
}

const OutputResult* CaseResult::worst() const {
    const OutputResult* worst = nullptr;
    double worst_ratio = -1;
    for (const auto& o : outputs) {
        // How far into (or past) its tolerance each output is; a failure always ranks first.
        const double nmse_ratio = o.tolerance.max_nmse > 0 ? o.stats.nmse / o.tolerance.max_nmse : o.stats.nmse * 1e30;
        const double abs_ratio =
            o.tolerance.max_abs > 0 ? o.stats.max_abs / o.tolerance.max_abs : o.stats.max_abs * 1e30;
        const double ratio = (o.pass ? 0.0 : 1e300) + std::max(nmse_ratio, abs_ratio);
        if (ratio > worst_ratio) worst_ratio = ratio, worst = &o;
    }
    return worst;
}

namespace {

// u8 and i32 outputs as floats, so the same error measures apply.
std::vector<float> as_floats(const HostTensor& t) {
    std::vector<float> out(static_cast<std::size_t>(t.elements()));
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (t.dtype == DType::u8) {
            out[i] = t.bytes[i];
        } else {
            std::int32_t v;
            std::memcpy(&v, t.bytes.data() + 4 * i, 4);
            out[i] = static_cast<float>(v);
        }
    }
    return out;
}

OutputResult compare_output(const HostTensor& ref, const HostTensor& got) {
    OutputResult r;
    r.name = ref.name;
    r.dtype = ref.dtype;
    r.op_class = ref.op_class;
    r.tolerance = tolerance_for(ref.op_class, ref.dtype);
    if (ref.bytes.size() != got.bytes.size() || ref.dtype != got.dtype) {
        r.stats.mismatched_nonfinite = 1;  // cannot happen for one case's tensors; judged a failure
        return r;
    }
    if (is_float(ref.dtype)) {
        r.stats = compare_buffers(ref.bytes.data(), ref.dtype, got.bytes.data(), got.dtype, ref.elements());
    } else {
        const std::vector<float> a = as_floats(ref), b = as_floats(got);
        r.stats = compare_buffers(a.data(), b.data(), static_cast<std::int64_t>(a.size()));
    }
    r.pass = passes(r.stats, r.tolerance);
    return r;
}

// Uploads, runs, reads the outputs back into `tensors`.
void run_on(Backend& backend, std::vector<HostTensor>& tensors, const CaseData& data) {
    DeviceTensors device(backend, tensors);
    data.run(backend, device);
    backend.synchronize();
    for (std::size_t i = 0; i < tensors.size(); ++i)
        if (tensors[i].output) backend.copy_to_host(tensors[i].bytes.data(), device[i], tensors[i].bytes.size());
}

}  // namespace

std::vector<OutputResult> compare_outputs(const std::vector<HostTensor>& reference,
                                          const std::vector<HostTensor>& candidate) {
    std::vector<OutputResult> out;
    for (std::size_t i = 0; i < reference.size() && i < candidate.size(); ++i)
        if (reference[i].output) out.push_back(compare_output(reference[i], candidate[i]));
    return out;
}

CaseResult run_case(const Case& c, Backend& reference, Backend& candidate, std::uint64_t seed) {
    CaseResult result{c.op, c.dtype, c.shape, Status::error, {}, {}};
    const Backend* running = nullptr;
    try {
        const CaseData data = c.make(seed);
        std::vector<HostTensor> ref = data.tensors, got = data.tensors;
        running = &reference;
        run_on(reference, ref, data);
        running = &candidate;
        run_on(candidate, got, data);
        result.outputs = compare_outputs(ref, got);
        const bool all =
            std::all_of(result.outputs.begin(), result.outputs.end(), [](const auto& o) { return o.pass; });
        result.status = all ? Status::pass : Status::fail;
    } catch (const std::exception& e) {
        result.message = running ? std::string(running->name()) + ": " + e.what() : std::string(e.what());
    }
    return result;
}

CaseResult skipped_case(const Case& c, const std::string& why) {
    return CaseResult{c.op, c.dtype, c.shape, Status::skipped, why, {}};
}

std::vector<Case> filter_cases(std::vector<Case> cases, const std::string& filter) {
    if (filter.empty()) return cases;
    const auto matches = [&](const std::string& op) { return op.find(filter) != std::string::npos; };
    std::erase_if(cases, [&](const Case& c) { return !matches(c.op) && std::ranges::none_of(c.checks, matches); });
    return cases;
}

}  // namespace tune::kernels::selftest

// Work beside the compute stream (kernels/backend.h Backend::beside), as the
// trainer's offload streams gradient slices to pinned host memory: a slice
// doubled on the compute stream, then copied and added into host memory on the
// side stream, then halved on the compute stream after wait(). The result is
// read back through the compute stream, so side work that started before the
// compute stream's earlier ops (no fork) or ran after its later ones (no join)
// gives 2x or 1x the source where 4x is expected. On the CPU it runs in line.
#include <fmt/format.h>

#include <memory>

#include "kernels/selftest/case_builder.h"
#include "kernels/selftest/cases.h"

namespace tune::kernels::selftest {

namespace {

Case side_work_case(DType t) {
    constexpr std::int64_t n = 1000;
    return {"side work",
            name_of(t),
            fmt::format("n={} copy and add into pinned host memory beside the compute stream", n),
            [=](std::uint64_t seed) {
                CaseBuilder cb(seed);
                const auto src = cb.normal("slice", t, n);
                const auto out = cb.zero_output("host_copy", t, n, OpClass::exact);
                return cb.build([=](Backend& be, DeviceTensors& d) {
                    const std::uint64_t bytes = static_cast<std::uint64_t>(n) * dtype_bytes(t);
                    const auto release = [&be, bytes](void* p) { be.deallocate_host(p, bytes); };
                    const std::unique_ptr<void, decltype(release)> host(be.allocate_host(bytes), release);
                    be.scale(d[src], n, 2.0f, t);
                    const std::unique_ptr<SideWork> side = be.beside([&] {
                        be.copy(host.get(), d[src], bytes);
                        be.add(host.get(), host.get(), d[src], n, t);
                    });
                    side->wait();
                    be.scale(d[src], n, 0.5f, t);
                    be.synchronize();  // the host memory is complete only now
                    be.copy(d[out], host.get(), bytes);
                    be.synchronize();
                });
            },
            {"scale", "add"}};
}

}  // namespace

void add_side_work_cases(std::vector<Case>& out) {
    for (DType t : kFloatTypes) out.push_back(side_work_case(t));
}

}  // namespace tune::kernels::selftest

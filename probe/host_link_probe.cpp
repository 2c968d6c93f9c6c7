#include "probe/host_link_probe.h"

namespace tune::probe {

double probe_host_link(kernels::Backend& backend, const HostLinkRate& rate, const ProbeSettings& s, double* spent) {
    Scratch host(backend, rate.bytes, kernels::ScratchPlace::host), device(backend, rate.bytes);
    const double seconds = seconds_per_call(
        backend, [&] { backend.copy(device.ptr, host.ptr, rate.bytes); }, s, spent);
    return seconds > 0 ? static_cast<double>(rate.bytes) / seconds : 0.0;
}

}  // namespace tune::probe

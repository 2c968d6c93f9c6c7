// The probes a sweep needs, from the store's cache when every one is there
// for this host, software version and device, else measured and cached.
// The driver calls it at sweep start; `tune probe` prints what it returns.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "probe/probes.h"
#include "store/store.h"
#include "sweep/spec.h"

namespace tune::probe {

struct SweepProbes {
    std::shared_ptr<const ProbedRates> rates;
    std::vector<ProbeRecord> records;
    bool cached = false;  // every probe came from the store
    double seconds = 0;   // spent measuring (0 when cached)
};

// The software part of a probe cache key: rates change with tune and its libraries.
std::string probe_software(const SoftwareVersions& v);

// `threads`: the CPU backend's threads per rank (ignored on CUDA, which probes device 0).
// `key.device` is completed with the device and, on the CPU, the threads.
// `collectives` measures the bus bandwidth at the sweep's world sizes (above one);
// without it they are neither measured nor asked of the cache.
SweepProbes probes_for_sweep(const SweepSpec& spec, std::uint32_t threads, Store* store, ProbeKey key, bool refresh,
                             const ProbeSettings& settings = {}, const CollectiveProber& collectives = {});

}  // namespace tune::probe

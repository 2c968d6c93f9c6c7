// The probes' measured numbers as records: what `tune probe` prints, the store
// caches and the collective probes' child process reports. A record's identity
// is its key, the probe's kind and shape as compact JSON; its name says the
// same in words for people to read, and nothing parses it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "estimate/probed_rates.h"

namespace tune::probe {

// One measured number, as `tune probe` prints it and the store caches it.
struct ProbeRecord {
    std::string name;  // for people: "gemm f32 m=256 n=64 k=64 dx acc"
    // The identity, the store's cache key: {"accumulate":true,"dtype":"f32","fp32_output":false,"k":64,"m":256,
    // "n":64,"pass":"dx","probe":"gemm"} (nlohmann::json::dump: sorted fields, so one probe has one text).
    std::string key;
    double value = 0;
    std::string unit;    // "FLOP/s", "s", "B/s", "B"
    double seconds = 0;  // how long the probe ran
};

// The rates as records, in ProbedRates' order: the GEMMs, attention (forward,
// backward), element-wise ops (layer forward, layer backward, outer), the
// optimizers, the NF4 dequantizations, the gradient buckets, the speed
// reference, the device baseline, the collectives (run_probes times them in it).
std::vector<ProbeRecord> records_of(const ProbedRates& rates);
// And back, from the keys alone: a record whose key is not a probe's (not JSON,
// an unknown kind, dtype or enum word, a size below 1) is skipped.
ProbedRates rates_of(const std::vector<ProbeRecord>& records);

// A collective's record: "busbw all-reduce n=2 bytes=262144" (value: bus bandwidth, B/s), keyed
// {"bytes":262144,"dtype":"f32","op":"all-reduce","probe":"collective","ranks":2}; read back with
// bus_bytes_per_s 0, nullopt when the key is not a collective's.
std::string collective_record_name(const CollectiveRate& c);
nlohmann::json probe_key(const CollectiveRate& c);
std::optional<CollectiveRate> collective_from_key(const nlohmann::json& key);

// An optimizer's record: "optimizer adam8bit bf16-mixed block=256 tensors=1x64,64x64" (value: seconds
// per pass over the tensors), keyed {"block":256,"optimizer":"adam8bit","precision":"bf16-mixed",
// "probe":"optimizer","tensors":[[1,64],[64,64]]}; read back with seconds 0, nullopt when not an optimizer's.
std::string optimizer_record_name(const OptimizerRate& r);
nlohmann::json probe_key(const OptimizerRate& r);
std::optional<OptimizerRate> optimizer_from_key(const nlohmann::json& key);

}  // namespace tune::probe

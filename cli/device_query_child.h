// The device query across a process boundary. The long-lived sweep process
// must never touch CUDA: even without a context, the runtime's first call
// loads the driver (libcuda) and NVML into it for the whole night, and a
// driver initialised before fork() is unusable in forked children. So the
// sweep asks a short-lived `tune devices --json` child instead, and that
// JSON is the one format both sides read.
#pragma once

#include <nlohmann/json.hpp>

#include "kernels/device_query.h"

namespace tune::cli {

nlohmann::json device_query_to_json(const DeviceQuery& q);
// Strict: a missing field is an error (the child is the same build).
DeviceQuery device_query_from_json(const nlohmann::json& j);

// Runs `<this binary> devices --json` and reads its answer. A build without
// CUDA answers in-process (there is nothing to load). Never throws: when the
// child fails, the query has no devices and why_none says what happened.
DeviceQuery query_devices_in_child();

}  // namespace tune::cli

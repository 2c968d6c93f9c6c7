// Plain records that go into and come out of the store. No SQLite types here:
// the sweep driver and the reports see only these and core/config.h.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/framework_prediction.h"
#include "core/noise_ties.h"
#include "store/timestamp.h"

namespace tune {

using SweepId = std::int64_t;
using TrialId = std::int64_t;

// A trial found `running` by this many opens of its sweep is given up as `failed`.
inline constexpr std::uint32_t kMaxAttempts = 3;

// The driver that holds a sweep (store/leases.cpp): one at a time per sweep name.
struct SweepLease {
    std::string host;
    std::int64_t pid = 0;
    Timestamp heartbeat{};  // when it last said it was alive
    bool same_holder(const SweepLease& o) const { return host == o.host && pid == o.pid; }
};

struct DeviceInfo {
    std::string name;  // "NVIDIA H100 80GB HBM3", or a preset name when estimate-only
    std::uint32_t count = 0;
    std::uint64_t memory_bytes = 0;  // per device
    bool operator==(const DeviceInfo&) const = default;
};

struct SoftwareVersions {
    std::string tune_version;
    std::string git_commit;
    std::string cuda;  // empty when not present
    std::string nccl;
    std::string driver;
    bool operator==(const SoftwareVersions&) const = default;
};

// What a sweep is and where it ran. `plan` is free-form data of the driver kept
// with the sweep, an object; its "makespan" (driver/makespan) the reports read.
struct SweepRecord {
    std::string name;
    std::string spec_text;
    std::string spec_hash;
    Timestamp created_at{};  // epoch means "now" when the sweep is created
    std::string host;
    DeviceInfo device;
    std::string backend;
    SoftwareVersions software;
    nlohmann::json plan = nlohmann::json::object();
    // Read back: why the stored plan was not what tune writes (naming the file, the sweep and the
    // column), and `plan` is then empty; empty when it was. Its readers warn with it.
    std::string plan_damage;
    std::string framework = "tune";  // [framework] name: the stack its answers predict for
    bool operator==(const SweepRecord&) const = default;
};

// Trials per status, indexed by TrialStatus.
using StatusCounts = std::array<std::uint64_t, kStatuses.size()>;

struct SweepSummary {
    SweepId id = 0;
    SweepRecord record;
    StatusCounts counts{};
    std::uint64_t count(TrialStatus s) const { return counts[static_cast<std::size_t>(s)]; }
    std::uint64_t total() const {
        std::uint64_t n = 0;
        for (auto c : counts) n += c;
        return n;
    }
};

struct RequeueCounts {
    std::uint64_t pending = 0;  // running -> pending, to be run again
    std::uint64_t failed = 0;   // running -> failed after kMaxAttempts
};

struct OpenedSweep {
    SweepId id = 0;
    bool created = false;    // a new sweep (or one just restarted)
    RequeueCounts requeued;  // what a dead driver had left running
};

// One enumerated configuration as the driver hands it over: pending, invalid
// (with the reason) or pruned (with the reason and the estimate that pruned it).
struct NewTrial {
    TrialConfig config;
    TrialStatus status = TrialStatus::pending;
    std::string reason;
    // Made with the sweep's base settings, before any trial fed calibration: its step
    // time stays as est_base_step_s while est_step_s follows recalibration (schema 7).
    std::optional<Estimate> estimate;
    double priority = 0;              // lower runs first under ClaimOrder::priority
    FrameworkPredictions frameworks;  // every stack's prediction beside our engine's (schema 10)
};

// A re-estimate of a pending trial after recalibration; status pending or pruned.
struct PendingUpdate {
    TrialId id = 0;
    Estimate estimate;
    double priority = 0;
    TrialStatus status = TrialStatus::pending;
    std::string reason;
    FrameworkPredictions frameworks;
};

enum class ClaimOrder { priority, estimated_fastest, estimated_smallest };

struct ClaimedTrial {
    TrialId id = 0;
    TrialConfig config;
    std::optional<Estimate> estimate;
    std::uint32_t attempts = 0;  // including this one
};

// Everything the store knows about one trial. `result` holds the status, reason,
// config, estimate and, once recorded, the measurement and step series.
struct TrialRecord {
    TrialId id = 0;
    SweepId sweep_id = 0;
    std::string sweep_name;
    std::string config_hash;
    TrialResult result;
    bool measured = false;                // record_result has run for it
    std::optional<double> median_step_s;  // over the steps after warmup
    // The step-time noise over the same steps (Google Benchmark's statistics; schema 6).
    std::optional<double> mean_step_s;
    std::optional<double> stddev_step_s;  // sample standard deviation
    std::optional<double> step_cv;        // stddev / mean
    std::uint64_t timed_steps = 0;
    // The step-time estimate before any trial fed calibration (NewTrial::estimate's);
    // result.estimate holds the calibrated one the sweep ran the trial with.
    std::optional<double> base_step_s;
    // What each stack users train with is predicted to show for the configuration, and the
    // stack its sweep answers for (SweepRecord::framework); empty for trials before schema 10.
    FrameworkPredictions frameworks;
    std::string sweep_framework = "tune";
    // Set by `best` when it answers for a stack other than our engine: that stack's
    // prediction, which the answer's peak (and predicted throughput) read.
    std::optional<FrameworkPrediction> answered_for;
    // The measured throughput with its noise, for core/noise_ties.
    NoisyRate noisy_rate() const {
        return {result.tokens_per_s, median_step_s.value_or(0), stddev_step_s.value_or(0), timed_steps,
                result.memory.peak};
    }
    double priority = 0;
    std::uint32_t attempts = 0;
    std::optional<Timestamp> started_at;
    std::optional<Timestamp> ended_at;
    std::string stderr_tail;
};

struct TrialQuery {
    std::optional<SweepId> sweep;       // all sweeps when unset
    std::optional<TrialStatus> status;  // every status when unset
    bool with_memory = true;            // per-component rows
    bool with_steps = false;            // step series
};

}  // namespace tune

namespace tune {

// The probe cache (store/probe_cache.cpp): measured rates are valid for one
// host, software version and device, so a sweep there probes once.
struct ProbeKey {
    std::string host;
    std::string software;  // tune version and git commit
    std::string device;    // the device name and the CPU threads per rank, as the prober wrote it
    bool operator==(const ProbeKey&) const = default;
};

struct ProbeRow {
    std::string probe;  // the probe's key, compact JSON: {"dtype":"f32","k":64,"m":256,...,"probe":"gemm"}
                        // (probe/probe_records.h)
    double value = 0;
    std::string unit;
    double seconds = 0;  // how long it ran
    bool operator==(const ProbeRow&) const = default;
};

}  // namespace tune

// One driver per sweep. A driver holds a lease on its sweep's name in the
// database (host, pid, heartbeat) while it runs; a second driver of the same
// sweep refuses and names the first. A lease is taken over when its holder is
// a process of this host that no longer exists, or when its heartbeat is older
// than kLeaseStaleAfter (a driver on another host, or one that hangs).
//
//   SweepLeaseHolder lease(store, db_path, spec.name, host);   // throws SweepBusyError
//   ... run the sweep ...                                      // heartbeats on a thread
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/config_error.h"
#include "store/store.h"

namespace tune {

inline constexpr std::chrono::seconds kLeaseHeartbeat{5};
inline constexpr std::chrono::seconds kLeaseStaleAfter{60};

// Another live driver runs the sweep: user input (exit 2), with who and how to proceed.
class SweepBusyError : public ConfigError {
public:
    using ConfigError::ConfigError;
};

// Why a lease no longer holds its sweep, or nullopt while its driver may be alive: its process
// is gone from this host, its heartbeat is older than kLeaseStaleAfter, or lies more than that
// in the future (clocks that disagree between hosts, or a damaged row, must not hold a sweep).
std::optional<std::string> lease_lapse(const SweepLease& held, std::string_view host, Timestamp now);

class SweepLeaseHolder {
public:
    // `database` is the path `store` was opened with: the heartbeat thread opens its own
    // connection (a Store is not shared between threads).
    SweepLeaseHolder(Store& store, const std::string& database, const std::string& sweep, const std::string& host);
    ~SweepLeaseHolder();
    SweepLeaseHolder(const SweepLeaseHolder&) = delete;
    SweepLeaseHolder& operator=(const SweepLeaseHolder&) = delete;

private:
    struct Heartbeat;
    Store& store_;
    std::string sweep_;
    SweepLease mine_;
    std::unique_ptr<Heartbeat> heartbeat_;
};

}  // namespace tune

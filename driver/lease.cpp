#include "driver/lease.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <fmt/format.h>

namespace tune {
namespace {

// kill(pid, 0) probes without signalling; EPERM still means the process exists.
bool process_exists(std::int64_t pid) {
    if (pid <= 0) return false;
    return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// Seconds since the heartbeat, negative for one in the future; in doubles, so a heartbeat of
// INT64_MIN or INT64_MAX does not overflow the difference.
double heartbeat_age_s(const SweepLease& held, Timestamp now) {
    return (static_cast<double>(now.time_since_epoch().count()) -
            static_cast<double>(held.heartbeat.time_since_epoch().count())) /
           1e3;
}

constexpr auto kStaleWindowS = static_cast<double>(kLeaseStaleAfter.count());

}  // namespace

std::optional<std::string> lease_lapse(const SweepLease& held, std::string_view host, Timestamp now) {
    if (held.host == host && !process_exists(held.pid))
        return fmt::format("its process (pid {}) is gone from this host", held.pid);
    const double age_s = heartbeat_age_s(held, now);
    if (age_s > kStaleWindowS) return fmt::format("its last heartbeat is {:.0f} s old", age_s);
    if (age_s < -kStaleWindowS)
        return fmt::format(
            "its heartbeat lies {:.0f} s in the future (clocks that disagree between hosts, or a "
            "damaged row)",
            -age_s);
    return std::nullopt;
}

// Renews the lease every kLeaseHeartbeat until stopped, on its own connection.
struct SweepLeaseHolder::Heartbeat {
    std::mutex mutex;
    std::condition_variable wake;
    bool stop = false;
    std::thread thread;

    Heartbeat(const std::string& database, const std::string& sweep, const SweepLease& mine) {
        // The thread starts with every signal blocked (it inherits this mask), so Ctrl-C and
        // SIGTERM keep reaching the driver's own handling (launch/process) and never this thread.
        sigset_t all, saved;
        sigfillset(&all);
        ::pthread_sigmask(SIG_SETMASK, &all, &saved);
        thread = std::thread([this, database, sweep, mine] {
            try {
                Store store(database, Store::Mode::read_write);
                std::unique_lock lock(mutex);
                while (!wake.wait_for(lock, kLeaseHeartbeat, [this] { return stop; })) {
                    lock.unlock();
                    store.renew_lease(sweep, mine);
                    lock.lock();
                }
            } catch (const std::exception&) {
                // A heartbeat that cannot be written (disk full, database gone) ends the heartbeat,
                // not the sweep: the main connection meets the same problem and reports it.
            }
        });
        ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    }
    ~Heartbeat() {
        {
            std::lock_guard lock(mutex);
            stop = true;
        }
        wake.notify_all();
        thread.join();
    }
};

SweepLeaseHolder::SweepLeaseHolder(Store& store, const std::string& database, const std::string& sweep,
                                   const std::string& host)
    : store_(store), sweep_(sweep), mine_{host, static_cast<std::int64_t>(::getpid()), {}} {
    const auto now = now_timestamp();
    std::optional<SweepLease> suspect;  // taken over although its heartbeat was not old
    auto is_stale = [&](const SweepLease& held) {
        const auto lapse = lease_lapse(held, host, now);
        if (lapse && heartbeat_age_s(held, now) < -kStaleWindowS) suspect = held;
        return lapse.has_value();
    };
    if (auto held = store_.take_lease(sweep_, mine_, is_stale)) {
        const auto age = std::chrono::duration_cast<std::chrono::seconds>(now - held->heartbeat).count();
        throw SweepBusyError(fmt::format(
            "sweep '{}' is being run by another driver (pid {} on host {}, alive {} s ago); wait for it to finish or "
            "stop it. A driver whose process is gone, or silent for {} s, is taken over.",
            sweep_, held->pid, held->host, std::max<std::int64_t>(age, 0), kLeaseStaleAfter.count()));
    }
    if (suspect)
        fmt::print(stderr, "warning: sweep '{}': took over the lease of pid {} on host {}: {}\n", sweep_, suspect->pid,
                   suspect->host, *lease_lapse(*suspect, host, now));
    heartbeat_ = std::make_unique<Heartbeat>(database, sweep_, mine_);
}

SweepLeaseHolder::~SweepLeaseHolder() {
    heartbeat_.reset();
    try {
        store_.drop_lease(sweep_, mine_);
    } catch (const std::exception&) {
        // Left behind, the lease is stale at once for this host (the pid is gone) and after
        // kLeaseStaleAfter for any other: nothing is lost.
    }
}

}  // namespace tune

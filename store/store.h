// The results database (SQLite, WAL). One Store is one connection: not for
// sharing between threads; open one per process or thread. Writers open
// read-write (creating and migrating the file); readers open read-only and see
// a consistent snapshot per call while a writer keeps writing.
//
//   Store db("tune.db", Store::Mode::read_write);
//   auto sweep = db.open_sweep(record, /*restart=*/false);   // continue or create
//   db.add_trials(sweep.id, enumerated);                     // idempotent by config hash
//   while (auto t = db.claim_next_pending(sweep.id)) {        // pending -> running
//       TrialResult r = run(t->config);
//       db.record_result(t->id, r, stderr_tail, started, ended);   // one transaction
//   }
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "store/records.h"
#include "store/store_error.h"

namespace tune {

namespace sql {
class Connection;
}

class Store {
public:
    enum class Mode { read_write, read_only };

    // read_only on a database of an older schema reads a migrated in-memory copy.
    Store(const std::string& path, Mode mode);
    Store(Store&&) noexcept;
    Store& operator=(Store&&) noexcept;
    ~Store();

    const std::string& path() const { return path_; }
    int schema_version() const;
    // "ok", or what PRAGMA integrity_check and foreign_key_check found wrong.
    std::string check_integrity() const;

    // ---- sweeps (store/sweeps.cpp)
    // Same name and spec hash: continues it, sending trials a dead driver left running back
    // to pending. A different spec hash: SpecChangedError, unless `restart`, which deletes
    // the old sweep with its trials and starts anew.
    OpenedSweep open_sweep(const SweepRecord& record, bool restart);
    std::vector<SweepSummary> sweeps() const;
    std::optional<SweepSummary> find_sweep(std::string_view name) const;
    void set_plan(SweepId sweep, const nlohmann::json& plan);

    // ---- leases (store/leases.cpp): one driver per sweep name, each call one transaction
    // Takes the lease of sweep `name` for `mine` (heartbeat = now), unless another holder has it
    // and `is_stale` says that holder is still alive: then nothing changes and that holder is
    // returned. `is_stale` runs under the write lock, so two drivers never both win.
    std::optional<SweepLease> take_lease(std::string_view name, const SweepLease& mine,
                                         const std::function<bool(const SweepLease&)>& is_stale);
    // Refreshes the heartbeat; false when the lease is no longer `mine` (taken over as stale).
    bool renew_lease(std::string_view name, const SweepLease& mine);
    void drop_lease(std::string_view name, const SweepLease& mine);
    // The lease of sweep `name` as it stands, whoever holds it; nullopt when none does.
    std::optional<SweepLease> lease(std::string_view name) const;

    // ---- trial writes (store/trial_writes.cpp); each call is one transaction
    // Inserts the configurations not yet in the sweep (by config hash); returns how many were new.
    std::size_t add_trials(SweepId sweep, std::span<const NewTrial> trials);
    // Re-estimates trials that are still pending (others are left alone).
    void update_pending(std::span<const PendingUpdate> updates);
    // The next pending trial, marked running with its attempt count bumped; nullopt when none.
    std::optional<ClaimedTrial> claim_next_pending(SweepId sweep, ClaimOrder order = ClaimOrder::priority);
    // The trial's status, measurement, memory rows and step rows, all or nothing.
    void record_result(TrialId trial, const TrialResult& result, std::string_view stderr_tail, Timestamp started,
                       Timestamp ended);
    // Running trials that ended for no fault of their configuration (interrupted, or their result
    // could not be written) go back to pending, to run again without the attempt the claim counted:
    // attempts count the drivers that died under a trial.
    void release(std::span<const TrialId> trials, std::string_view reason);
    void release(TrialId trial, std::string_view reason) { release(std::span(&trial, 1), reason); }
    // Trials left running: back to pending, or failed once they used kMaxAttempts.
    RequeueCounts requeue_stale_running(SweepId sweep);

    // ---- reads (store/trial_reads.cpp)
    std::vector<TrialRecord> trials(const TrialQuery& query) const;
    std::optional<TrialRecord> trial(TrialId id) const;
    // The measured Pareto front of a sweep (peak memory vs tokens/s), by increasing peak.
    std::vector<TrialRecord> pareto_front(SweepId sweep) const;

    // For readers (`tune list`, `best`, `export`, reports): read-only, and a ConfigError
    // that says what to do when the file does not exist.
    static Store open_reader(const std::string& path);

    // ---- the probe cache (store/probe_cache.cpp)
    // Every cached probe of `key` (empty when none).
    std::vector<ProbeRow> cached_probes(const ProbeKey& key) const;
    // Replaces the rows of those probes for `key`, in one transaction.
    void cache_probes(const ProbeKey& key, std::span<const ProbeRow> rows);

private:
    RequeueCounts requeue_in_transaction(SweepId sweep);

    std::string path_;
    std::unique_ptr<sql::Connection> db_;
};

}  // namespace tune

// Store: sweep leases, so two drivers never run the same sweep at once (each would
// re-run the other's in-flight trial, taking it for one a dead driver left running).
#include "store/sqlite_db.h"
#include "store/store.h"

namespace tune {
namespace {

constexpr sql::Sql kRead{"read_lease", "SELECT host, pid, heartbeat_ms FROM sweep_leases WHERE sweep_name = ?1"};
constexpr sql::Sql kUpsert{"take_lease", R"sql(
INSERT INTO sweep_leases (sweep_name, host, pid, heartbeat_ms) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (sweep_name) DO UPDATE SET host = excluded.host, pid = excluded.pid, heartbeat_ms = excluded.heartbeat_ms)sql"};
constexpr sql::Sql kRenew{"renew_lease",
                          "UPDATE sweep_leases SET heartbeat_ms = ?4 WHERE sweep_name = ?1 AND host = ?2 AND pid = ?3"};
constexpr sql::Sql kDrop{"drop_lease", "DELETE FROM sweep_leases WHERE sweep_name = ?1 AND host = ?2 AND pid = ?3"};

std::int64_t now_ms() { return now_timestamp().time_since_epoch().count(); }

}  // namespace

std::optional<SweepLease> Store::take_lease(std::string_view name, const SweepLease& mine,
                                            const std::function<bool(const SweepLease&)>& is_stale) {
    sql::Transaction tx(*db_);
    {
        auto q = db_->query(kRead);
        q.bind(1, name);
        if (q.step()) {
            SweepLease held{q.text(0), q.int64(1), Timestamp{std::chrono::milliseconds{q.int64(2)}}};
            if (!held.same_holder(mine) && !is_stale(held)) return held;
        }
    }
    db_->query(kUpsert).bind(1, name).bind(2, mine.host).bind(3, mine.pid).bind(4, now_ms()).run();
    tx.commit();
    return std::nullopt;
}

std::optional<SweepLease> Store::lease(std::string_view name) const {
    auto q = db_->query(kRead);
    q.bind(1, name);
    if (!q.step()) return std::nullopt;
    return SweepLease{q.text(0), q.int64(1), Timestamp{std::chrono::milliseconds{q.int64(2)}}};
}

bool Store::renew_lease(std::string_view name, const SweepLease& mine) {
    sql::Transaction tx(*db_);
    db_->query(kRenew).bind(1, name).bind(2, mine.host).bind(3, mine.pid).bind(4, now_ms()).run();
    const bool held = db_->changes() == 1;
    tx.commit();
    return held;
}

void Store::drop_lease(std::string_view name, const SweepLease& mine) {
    sql::Transaction tx(*db_);
    db_->query(kDrop).bind(1, name).bind(2, mine.host).bind(3, mine.pid).run();
    tx.commit();
}

}  // namespace tune

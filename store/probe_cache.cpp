// Store: the probe cache, measured rates per host, software version and device.
#include "store/sqlite_db.h"
#include "store/store.h"
#include "store/timestamp.h"

namespace tune {
namespace {

constexpr sql::Sql kRead{"read_probes",
                         "SELECT probe, value, unit, seconds FROM probes "
                         "WHERE host = ?1 AND software = ?2 AND device = ?3 ORDER BY probe"};
constexpr sql::Sql kUpsert{"cache_probe", R"sql(
INSERT INTO probes (host, software, device, probe, value, unit, seconds, measured_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
ON CONFLICT (host, software, device, probe) DO UPDATE SET
    value = excluded.value, unit = excluded.unit, seconds = excluded.seconds, measured_at = excluded.measured_at)sql"};

}  // namespace

std::vector<ProbeRow> Store::cached_probes(const ProbeKey& key) const {
    std::vector<ProbeRow> out;
    auto q = db_->query(kRead);
    q.bind(1, key.host).bind(2, key.software).bind(3, key.device);
    while (q.step()) out.push_back({q.text(0), q.real(1), q.text(2), q.real(3)});
    return out;
}

void Store::cache_probes(const ProbeKey& key, std::span<const ProbeRow> rows) {
    sql::Transaction tx(*db_);
    const std::string now = format_timestamp(now_timestamp());
    for (const ProbeRow& r : rows) {
        auto q = db_->query(kUpsert);
        q.bind(1, key.host).bind(2, key.software).bind(3, key.device).bind(4, r.probe).bind(5, r.value);
        q.bind(6, r.unit).bind(7, r.seconds).bind(8, now);
        q.run();
    }
    tx.commit();
}

}  // namespace tune

// Store: the sweeps table (create, continue, restart, list with counts).
#include <fmt/format.h>

#include "store/row_checks.h"
#include "store/sqlite_db.h"
#include "store/store.h"

namespace tune {
namespace {

constexpr sql::Sql kFindByName{"find_sweep", "SELECT id, spec_hash FROM sweeps WHERE name = ?1"};
constexpr sql::Sql kDelete{"delete_sweep", "DELETE FROM sweeps WHERE id = ?1"};
constexpr sql::Sql kTrialCount{"count_sweep_trials", "SELECT count(*) FROM trials WHERE sweep_id = ?1"};
constexpr sql::Sql kInsert{"insert_sweep", R"sql(
INSERT INTO sweeps (name, spec_text, spec_hash, created_at, host, device_name, device_count, device_memory,
                    backend, tune_version, git_commit, cuda_version, nccl_version, driver_version, plan_json,
                    framework)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16))sql"};
constexpr sql::Sql kSelectAll{"list_sweeps", R"sql(
SELECT id, name, spec_text, spec_hash, created_at, host, device_name, device_count, device_memory,
       backend, tune_version, git_commit, cuda_version, nccl_version, driver_version, plan_json, framework
FROM sweeps WHERE (?1 IS NULL OR name = ?1) ORDER BY id)sql"};
constexpr sql::Sql kCounts{"count_trials_by_status",
                           "SELECT sweep_id, status, count(*) FROM trials GROUP BY sweep_id, status"};
constexpr sql::Sql kSetPlan{"set_plan", "UPDATE sweeps SET plan_json = ?2 WHERE id = ?1"};

// Plan data may carry user text; invalid UTF-8 is replaced rather than refused.
std::string dump_plan(const nlohmann::json& plan) {
    return plan.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

SweepId insert_sweep(sql::Connection& db, const SweepRecord& r) {
    const Timestamp created = r.created_at == Timestamp{} ? now_timestamp() : r.created_at;
    auto q = db.query(kInsert);
    q.bind(1, r.name).bind(2, r.spec_text).bind(3, r.spec_hash).bind(4, format_timestamp(created));
    q.bind(5, r.host).bind(6, r.device.name).bind(7, r.device.count).bind(8, r.device.memory_bytes);
    q.bind(9, r.backend).bind(10, r.software.tune_version).bind(11, r.software.git_commit);
    q.bind(12, r.software.cuda).bind(13, r.software.nccl).bind(14, r.software.driver).bind(15, dump_plan(r.plan));
    q.bind(16, r.framework);
    q.run();
    return db.last_insert_rowid();
}

std::uint64_t trial_count(sql::Connection& db, SweepId id) {
    auto q = db.query(kTrialCount);
    q.bind(1, id).step();
    return q.uint64(0);
}

// The plan as tune wrote it, or an empty one with `plan_damage` saying why: only the predicted
// makespan reads it, so a damaged plan leaves that out rather than the sweep (store/row_checks.h).
// The name is escaped ({:?}), so the message reaches a terminal as it is.
void read_plan(const std::string& path, SweepId id, const std::string& text, SweepRecord& r) {
    r.plan = nlohmann::json::parse(text, nullptr, false);
    std::optional<std::string> problem =
        r.plan.is_discarded() ? std::optional<std::string>("is not JSON") : sql::plan_problem(r.plan);
    if (!problem) return;
    r.plan = nlohmann::json::object();
    r.plan_damage = fmt::format(
        "{}: sweep {:?} (id {}): column plan_json {}; tune never writes that, so the database was edited or "
        "damaged: the sweep's predicted makespan is left out (UPDATE sweeps SET plan_json = '{{}}' WHERE id = {} "
        "clears the plan)",
        path, r.name, id, *problem, id);
}

SweepRecord read_sweep(const std::string& path, const sql::Query& q) {
    SweepRecord r;
    r.name = q.text(1);
    r.spec_text = q.text(2);
    r.spec_hash = q.text(3);
    r.created_at = parse_timestamp(q.text(4)).value_or(Timestamp{});
    r.host = q.text(5);
    r.device = {q.text(6), static_cast<std::uint32_t>(q.int64(7)), q.uint64(8)};
    r.backend = q.text(9);
    r.software = {q.text(10), q.text(11), q.text(12), q.text(13), q.text(14)};
    read_plan(path, q.int64(0), q.text(15), r);
    r.framework = q.text(16);
    return r;
}

std::vector<SweepSummary> select_sweeps(const std::string& path, sql::Connection& db,
                                        std::optional<std::string_view> name) {
    sql::Transaction tx(db, sql::Transaction::Kind::read);  // sweeps and counts from one snapshot
    std::vector<SweepSummary> out;
    {
        auto q = db.query(kSelectAll);
        q.bind(1, name);
        while (q.step()) out.push_back({q.int64(0), read_sweep(path, q), {}});
    }
    auto q = db.query(kCounts);
    while (q.step()) {
        const auto status = parse_status(q.text(1));
        for (auto& s : out)
            if (s.id == q.int64(0) && status) s.counts[static_cast<std::size_t>(*status)] = q.uint64(2);
    }
    return out;
}

}  // namespace

OpenedSweep Store::open_sweep(const SweepRecord& record, bool restart) {
    sql::Transaction tx(*db_);
    OpenedSweep opened;
    std::optional<std::pair<SweepId, std::string>> existing;
    {
        auto q = db_->query(kFindByName);
        q.bind(1, record.name);
        if (q.step()) existing.emplace(q.int64(0), q.text(1));
    }
    if (existing && !restart && existing->second != record.spec_hash) {
        throw SpecChangedError(
            fmt::format("sweep '{}' already exists in {} with a different spec (stored spec hash {}, this one {}); "
                        "give the sweep a new name to keep both, or pass --restart to discard its {} recorded trials "
                        "and start over",
                        record.name, path_, existing->second, record.spec_hash, trial_count(*db_, existing->first)));
    }
    if (existing && !restart) {
        opened.id = existing->first;
        opened.requeued = requeue_in_transaction(opened.id);
    } else {
        if (existing) db_->query(kDelete).bind(1, existing->first).run();
        opened.id = insert_sweep(*db_, record);
        opened.created = true;
    }
    tx.commit();
    return opened;
}

std::vector<SweepSummary> Store::sweeps() const { return select_sweeps(path_, *db_, std::nullopt); }

std::optional<SweepSummary> Store::find_sweep(std::string_view name) const {
    auto found = select_sweeps(path_, *db_, name);
    if (found.empty()) return std::nullopt;
    return std::move(found.front());
}

void Store::set_plan(SweepId sweep, const nlohmann::json& plan) {
    db_->query(kSetPlan).bind(1, sweep).bind(2, dump_plan(plan)).run();
}

}  // namespace tune

#include "train/micro_batch_graphs.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "core/zero_plan.h"

namespace tune::train {

std::optional<std::string> micro_batch_graphs_off(const TrialConfig& c, const kernels::Backend& backend) {
    if (!backend.records_device_work()) return fmt::format("the {} backend replays no graphs", backend.name());
    if (c.optimizer == Optimizer::lomo) return std::string("LOMO updates inside backward");
    const ZeroPlan zero = zero_plan(c.zero_stage);
    if (zero.gathers_weights_before_use() || zero.reduce_scatters_during_backward())
        return fmt::format("ZeRO-{} gathers or reduce-scatters inside the micro-batch", c.zero_stage);
    if (c.tensor_parallel > 1) return std::string("tensor parallelism's collectives run inside the micro-batch");
    if (c.pipeline_parallel > 1) return std::string("pipeline stages interleave their micro-batches");
    if (c.neftune_alpha > 0) return std::string("NEFTune's noise takes a new seed each micro-batch");
    if (precision_plan(c.precision).loss_scaling) return std::string("the loss scale changes between steps");
    return std::nullopt;
}

MicroBatchGraphs::MicroBatchGraphs(kernels::Backend& backend, Allocator& memory, ModelState& trained)
    : backend_(backend), memory_(memory), trained_(trained) {}

MicroBatchGraphs::~MicroBatchGraphs() {
    recorded_.clear();  // the graphs first: they point into the arena
    release_arena();
}

void MicroBatchGraphs::release_arena() noexcept {
    backend_.deallocate(arena_, plan_.extent);
    arena_ = nullptr;
}

MicroBatchGraphs::Recorded& MicroBatchGraphs::entry_for(const UnwrittenTensors& marks) {
    const auto it =
        std::find_if(recorded_.begin(), recorded_.end(), [&](const Recorded& r) { return r.before == marks; });
    if (it != recorded_.end()) return *it;
    recorded_.emplace_back();
    recorded_.back().before = marks;
    return recorded_.back();
}

void MicroBatchGraphs::run(const std::function<void()>& ops) {
    if (stopped_) {
        ops();
        return;
    }
    Recorded& r = entry_for(trained_.unwritten());
    if (r.graph) {
        trained_.set_unwritten(r.after);
        memory_.count(r.trace);
        r.graph->replay();
        ++launches_;
        return;
    }
    if (r.ran_eagerly) {
        record(r, ops);
        return;
    }
    const bool plan = planned_.empty();
    if (plan) memory_.start_trace();
    try {
        ops();
    } catch (...) {
        if (plan) memory_.end_trace();
        throw;
    }
    if (plan) planned_ = memory_.end_trace();
    r.ran_eagerly = true;
}

void MicroBatchGraphs::reserve_arena() {
    if (arena_ != nullptr) return;
    plan_ = plan_arena(planned_);
    if (plan_.extent == 0) throw std::logic_error("the micro-batch allocated nothing to place");
    // What the eager runs freed goes back first: the pool's kept pieces may not hold one range this large.
    backend_.trim_memory();
    arena_ = backend_.allocate(plan_.extent);
}

void MicroBatchGraphs::record(Recorded& r, const std::function<void()>& ops) {
    const UnwrittenTensors before = trained_.unwritten();
    std::optional<Arena> places;
    bool tracing = false;
    try {
        reserve_arena();
        places.emplace(arena_, plan_);
        memory_.place_in(&*places);
        memory_.start_trace();
        tracing = true;
        r.graph = backend_.record(ops);
    } catch (const std::exception& e) {
        // A capture the backend refused, an arena the device has no room for, or requests that
        // differ from the plan: this micro-batch and every later one run eagerly.
        memory_.place_in(nullptr);
        if (tracing) memory_.end_trace();
        trained_.set_unwritten(before);
        stopped_ = e.what();
        recorded_.clear();
        release_arena();
        ops();
        return;
    }
    memory_.place_in(nullptr);
    r.trace = memory_.end_trace();
    r.after = trained_.unwritten();
    r.graph->replay();  // recording ran nothing
    ++launches_;
}

}  // namespace tune::train

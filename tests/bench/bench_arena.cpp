// The arena a replayed micro-batch needs (train/micro_batch_graphs.h)
// against the micro-batch's own peak: how much its planned placement at fixed
// offsets costs beyond the ledger. The ledger's sequence of requests is the
// same on every backend, so the CPU runs it: one eager micro-batch after a
// first step, traced, then placed as the GPU's recording would place it.
//   build/bench/bench_arena [--model llama-7b --layers 2 --context 1024 ...]
// Prints one line per configuration; asserts nothing.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/presets.h"
#include "kernels/cpu/cpu_backend.h"
#include "train/comm/comm.h"
#include "train/io/data.h"
#include "train/memory/memory.h"
#include "train/trainer.h"

namespace {

using namespace tune;

// The micro-batch's own bytes at their most (its ledger peak above what was live when it began).
std::uint64_t micro_batch_peak(const train::LedgerTrace& trace) {
    std::uint64_t live = 0, most = 0;
    for (const train::LedgerEvent& e : trace) {
        if (e.kind == train::LedgerEvent::Kind::allocate) live += e.bytes;
        if (e.kind == train::LedgerEvent::Kind::release) live -= e.bytes;
        most = std::max(most, live);
    }
    return most;
}

void measure(const TrialConfig& c) {
    kernels::CpuBackend backend;
    train::SingleRankComm comm;
    const auto tokens = train::synthetic_tokens(c.seed, c.model.vocab);
    train::Trainer trainer(backend, comm, c, *tokens);
    trainer.compute_gradients();  // the first calls of each shape behind
    trainer.memory().start_trace();
    trainer.compute_gradients();
    const train::LedgerTrace trace = trainer.memory().end_trace();
    std::uint64_t buffers = 0;
    for (const train::LedgerEvent& e : trace) buffers += e.kind == train::LedgerEvent::Kind::allocate;
    const std::uint64_t peak = micro_batch_peak(trace), arena = train::plan_arena(trace).extent;
    fmt::print("{} L={} b={} s={} {} {} {}: {} buffers, micro-batch peak {:.1f} MiB, arena {:.1f} MiB, ratio {:.4f}\n",
               c.model.name, c.model.layers, c.micro_batch, c.context, to_string(c.precision),
               to_string(c.checkpointing), to_string(c.method), buffers, peak / 1048576.0, arena / 1048576.0,
               static_cast<double>(arena) / static_cast<double>(peak));
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"The arena a replayed micro-batch needs against its own peak, per checkpointing mode"};
    std::string model = "small";
    std::uint64_t layers = 0;
    std::uint32_t context = 256, micro_batch = 1;
    std::string precision = "bf16";
    app.add_option("--model", model, "a model preset")->capture_default_str();
    app.add_option("--layers", layers, "keep this many of its layers (0: all)");
    app.add_option("--context", context)->capture_default_str();
    app.add_option("--micro-batch", micro_batch)->capture_default_str();
    app.add_option("--precision", precision)->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    const auto spec = find_model(model);
    const auto p = parse_enum(precision, kPrecisions);
    if (!spec || !p) {
        fmt::print(stderr, "bench_arena: unknown --model {} or --precision {} (models: {})\n", model, precision,
                   model_names());
        return 2;
    }
    TrialConfig c;
    c.model = *spec;
    if (layers > 0) c.model.layers = layers;
    c.precision = *p;
    c.context = context;
    c.micro_batch = micro_batch;
    fmt::print("bench_arena: --model {} --layers {} --context {} --micro-batch {} --precision {}\n", model,
               c.model.layers, context, micro_batch, precision);
    for (Checkpointing k : {Checkpointing::none, Checkpointing::selective_op, Checkpointing::full}) {
        c.checkpointing = k;
        for (Method m : {Method::full, Method::lora}) {
            c.method = m;
            measure(c);
        }
    }
    return 0;
}

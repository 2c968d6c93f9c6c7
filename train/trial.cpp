#include "train/trial.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <memory>

#include <fmt/format.h>

#include "core/config_error.h"
#include "core/noise_rule.h"
#include "core/output_file.h"
#include "core/parallel_plan.h"
#include "core/presets.h"
#include "core/units.h"
#include "core/validity.h"
#include "estimate/estimate.h"
#include "estimate/model_flops.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/device_query.h"
#include "kernels/error.h"
#include "kernels/speed_reference.h"
#include "launch/launch.h"
#include "train/comm/comm.h"
#include "train/comm/comm_mpi.h"
#include "train/comm/comm_nccl.h"
#include "train/comm/mpi_runtime.h"
#include "train/io/data.h"
#include "train/io/hf_model.h"
#include "train/io/peft_adapter.h"
#include "train/lora.h"
#include "train/memory/device_overhead.h"
#include "train/memory/host_memory.h"
#include "train/memory/real_memory.h"
#include "train/step_timer.h"
#include "train/trainer.h"

namespace tune::train {

namespace {

double tokens_per_step(const TrialConfig& c) {
    return static_cast<double>(c.micro_batch) * c.context * c.grad_accum * parallel_plan(c).world();
}

Hardware cpu_hardware() {
    if (auto hw = find_device("cpu")) return *hw;
    return Hardware{};
}

double peak_flops(const TrialConfig& c, const Hardware& hw) {
    return c.precision == Precision::fp32 ? hw.peak_flops_fp32 : hw.peak_flops_half;
}

double mfu_of(double flops, double seconds, const TrialConfig& c, const Hardware& hw) {
    const double peak = peak_flops(c, hw);
    return peak > 0 && seconds > 0 ? flops / seconds / peak : 0.0;
}

// The backend a trial runs on, and the device numbers its estimate and MFU use.
struct TrialBackend {
    std::unique_ptr<kernels::Backend> backend;
    Hardware hardware;
    int cpu_threads = 0;    // 0 on CUDA
    int device_index = -1;  // the CUDA device; -1 on the CPU
};

bool wants_cuda(const TrialOptions& o) { return uses_cuda(o.backend); }

TrialBackend make_backend(const TrialOptions& o, int local_rank) {
    if (!wants_cuda(o)) {
        auto cpu = std::make_unique<kernels::CpuBackend>(kernels::CpuBackendOptions{o.threads, 0});
        const int threads = cpu->threads();
        return {std::move(cpu), cpu_hardware(), threads};
    }
    const DeviceQuery q = query_devices();
    if (q.devices.empty()) throw BackendError("--backend cuda, but no CUDA device is visible: " + q.why_none);
    const VisibleDevice& d = q.devices[static_cast<std::size_t>(local_rank) % q.devices.size()];
    Hardware hw = match_device(d.name, d.total_memory).value_or(Hardware{});
    if (hw.device.empty()) {  // an unknown GPU: its memory is known, its peak FLOP/s are not (MFU 0)
        hw.device = d.name;
        hw.backend = BackendKind::cuda;
        hw.memory_bytes = d.total_memory;
    }
    return {kernels::make_cuda_backend(d.index), hw, 0, d.index};
}

void log_step(std::FILE* log, const TrialConfig& c, std::size_t i, const StepStats& s, double ms,
              const Allocator& memory, const Allocator& host, double mfu) {
    if (log == nullptr) return;
    const MemoryBreakdown& peak = memory.peak_breakdown();
    const std::string host_peak = host.peak() > 0 ? fmt::format(" | host {}", format_bytes(host.peak())) : "";
    // A step past the configured ones (more for noise) shows as "7/6+".
    fmt::print(log,
               "step {:>3}/{}{} | loss {:.6f} | norm {:.4f} | {:8.1f} ms | {:8.0f} tok/s | MFU {:5.2f}% | "
               "peak {} ({}){}{}{}\n",
               i + 1, c.steps, i >= c.steps ? "+" : "", s.loss, s.grad_norm, ms, tokens_per_step(c) / (ms / 1e3),
               100 * mfu, format_bytes(peak.peak), peak.peak_phase, host_peak,
               uses_loss_scaling(c.precision) ? fmt::format(" | scale {:g}", s.loss_scale) : std::string(),
               s.skipped ? " | SKIPPED (fp16 overflow)" : "");
    std::fflush(log);
}

std::unique_ptr<TokenSource> token_source(const TrialConfig& c, const TrialOptions& o) {
    if (o.tokens_file) return file_tokens(*o.tokens_file, c.model.vocab);
    return synthetic_tokens(c.seed, c.model.vocab);
}

void log_noise_rule(std::FILE* log, const TrialConfig& c, const NoiseRule& rule) {
    if (log == nullptr) return;
    if (rule.max_cv > 0 && rule.max_steps > c.steps)
        fmt::print(log,
                   "timing: {} steps ({} warm-up); more while the timed steps' CV is above {:.1f}%, up to {} "
                   "steps ([trial] max_cv, max_steps)\n",
                   c.steps, c.warmup, 100 * rule.max_cv, rule.max_steps);
    else
        fmt::print(log, "timing: {} steps ({} warm-up), no more for noise ([trial] max_cv {:g}, max_steps {})\n",
                   c.steps, c.warmup, rule.max_cv, rule.max_steps);
}

void log_noise(std::FILE* log, const StepStatistics& s) {
    if (log == nullptr) return;
    fmt::print(log, "timing: {} timed steps | median {:.1f} ms | mean {:.1f} ms | stddev {:.2f} ms | CV {:.1f}%\n",
               s.count, s.median_ms, s.mean_ms, s.stddev_ms, 100 * s.cv);
}

// Whether to run another step past the configured ones: rank 0's times decide,
// for every rank (each must run the same steps, or the others wait in a collective).
// Its broadcast's bytes go to `control_bytes`, which the step's collectives leave out.
bool another_step(Comm& comm, const std::vector<double>& step_ms, const TrialConfig& c, const NoiseRule& rule,
                  std::FILE* log, std::uint64_t& control_bytes) {
    if (step_ms.size() < c.steps) return true;
    if (rule.max_cv <= 0 || rule.max_steps <= c.steps) return false;
    float more = needs_more_steps(step_ms, c.warmup, rule) ? 1.0f : 0.0f;
    if (comm.world_size() > 1) {
        const std::uint64_t before = comm.bytes_moved();
        comm.broadcast(&more, 1, kernels::DType::f32, 0);
        control_bytes += comm.bytes_moved() - before;
    }
    if (more > 0 && log != nullptr)
        fmt::print(log, "timing: CV {:.1f}% is above {:.1f}%: step {} of at most {}\n",
                   100 * step_statistics(step_ms, c.warmup).cv, 100 * rule.max_cv, step_ms.size() + 1, rule.max_steps);
    return more > 0;
}

// Steps the trainer, filling r: the configured steps, then more while the
// timed ones are noisy (options.noise). Before each step the speed reference
// (kernels/speed_reference.h) runs, outside the step's time: how fast the
// machine was while this trial's steps ran.
// A step's time ends when the device has finished it (the host returns from
// step() with the update still queued on a GPU). After the warm-up steps the
// pool's high-water marks restart, so one-off GEMM tuning scratch does not
// pin the measured overhead.
void run_steps(Trainer& trainer, kernels::Backend& backend, Comm& comm, const TrialConfig& c, const TrialOptions& o,
               const Hardware& hw, TrialResult& r, TrialDetails& d, std::uint64_t& control_bytes) {
    log_noise_rule(o.log, c, o.noise);
    double timed_ms = 0;
    for (std::size_t i = 0; another_step(comm, r.step_ms, c, o.noise, o.log, control_bytes); ++i) {
        d.speed_reference_ms.push_back(1e3 * kernels::time_speed_reference(backend));
        double ms = 0;
        StepStats s = time_step_to_completion([&] { return trainer.step(); }, [&] { backend.synchronize(); }, ms);
        if (i + 1 == c.warmup && c.steps > c.warmup) kernels::reset_cuda_memory_marks(backend);
        if (o.fault_nan && i == 0) s.loss = std::nan("");
        if (o.fault_kill) std::raise(SIGKILL);  // a rank dying mid-trial, as the OOM killer would
        const double mfu = mfu_of(step_flops(c), ms / 1e3, c, hw);
        log_step(o.log, c, i, s, ms, trainer.memory(), trainer.host_memory(), mfu);
        r.step_ms.push_back(ms);
        r.losses.push_back(s.loss);
        d.skipped.push_back(s.skipped);
        d.loss_scales.push_back(s.loss_scale);
        d.grad_norms.push_back(s.grad_norm);
        if (!std::isfinite(s.loss)) throw std::runtime_error(fmt::format("loss is {} at step {}", s.loss, i + 1));
        if (i >= c.warmup) timed_ms += ms;
    }
    r.step_stats = step_statistics(r.step_ms, c.warmup);
    r.speed_reference_s = step_statistics(d.speed_reference_ms, c.warmup).median_ms / 1e3;
    log_noise(o.log, r.step_stats);
    // Which attention ran on a GPU: cuDNN's graphs or tune's kernels, and why.
    if (kernels::cuda_memory_stats(backend)) {
        r.attention = kernels::cuda_attention_path(backend);
        if (o.log != nullptr) {
            fmt::print(o.log, "attention: {}\n", r.attention);
            const std::optional<std::string> stopped = trainer.micro_batch_graphs_stopped();
            fmt::print(o.log, "micro-batch graphs: {} launched{}\n", trainer.micro_batch_graph_launches(),
                       stopped ? "; eager from then on: " + *stopped : std::string());
        }
    }
    const std::size_t timed = r.step_stats.count;
    if (timed > 0 && timed_ms > 0) {
        r.tokens_per_s = tokens_per_step(c) * static_cast<double>(timed) / (timed_ms / 1e3);
        r.mfu = mfu_of(step_flops(c) * static_cast<double>(timed), timed_ms / 1e3, c, hw);
    }
}

// On the CPU the measured baseline is the estimate's overhead (a GPU's comes
// from the device's preset or the driver's calibration).
Estimate trial_estimate(const TrialConfig& c, const TrialBackend& b, std::uint64_t baseline) {
    EstimateOptions o;
    if (b.cpu_threads > 0) {
        o.cpu_threads = static_cast<std::uint32_t>(b.cpu_threads);
        o.overhead_bytes = baseline;
    }
    return estimate(c, b.hardware, o);
}

// A GPU has no high-water mark of its own: sampled often. A CPU's VmHWM is
// exact; its sampled VmRSS only backs it up where clear_refs is refused.
MemoryWatch watch_memory(const TrialBackend& b) {
    if (b.device_index >= 0) return MemoryWatch(device_probe(b.device_index), 2);
    return MemoryWatch(process_probe(), 20);
}

// Each rank's view of the machine, the largest of each over ranks.
void combine_real_memory(Comm& comm, const RealMemory& mine, TrialResult& r) {
    const auto n = static_cast<std::size_t>(comm.world_size());
    const auto me = static_cast<std::size_t>(comm.rank());
    // (3, n): real peaks, baselines, untracked (as two's complement bits).
    std::vector<std::uint64_t> all(3 * n, 0);
    all[me] = mine.real_peak;
    all[n + me] = mine.baseline;
    all[2 * n + me] = static_cast<std::uint64_t>(mine.untracked);
    if (n > 1) {
        // The three rows gathered at once: each rank fills its column of every row.
        std::vector<std::uint64_t> mine_cols{all[me], all[n + me], all[2 * n + me]};
        std::vector<std::uint64_t> gathered(3 * n, 0);
        std::copy(mine_cols.begin(), mine_cols.end(), gathered.begin() + static_cast<std::ptrdiff_t>(3 * me));
        comm.all_gather(gathered.data(), static_cast<std::int64_t>(3 * n * sizeof(std::uint64_t)), kernels::DType::u8);
        for (std::size_t k = 0; k < n; ++k)
            for (std::size_t row = 0; row < 3; ++row) all[row * n + k] = gathered[3 * k + row];
    }
    r.rank_real_peaks.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
    r.rank_baselines.assign(all.begin() + static_cast<std::ptrdiff_t>(n),
                            all.begin() + static_cast<std::ptrdiff_t>(2 * n));
    r.rank_untracked.clear();
    for (std::size_t k = 0; k < n; ++k) r.rank_untracked.push_back(static_cast<std::int64_t>(all[2 * n + k]));
    r.real_peak = *std::max_element(r.rank_real_peaks.begin(), r.rank_real_peaks.end());
    r.baseline = *std::max_element(r.rank_baselines.begin(), r.rank_baselines.end());
    r.untracked = *std::max_element(r.rank_untracked.begin(), r.rank_untracked.end());
}

// The slowest rank's speed reference: a step waits for its slowest rank, and
// two vCPUs of one VM were seen to run 25% apart.
void combine_speed_reference(Comm& comm, TrialResult& r) {
    const auto n = static_cast<std::size_t>(comm.world_size());
    if (n == 1) return;
    std::vector<double> all(n, 0.0);
    all[static_cast<std::size_t>(comm.rank())] = r.speed_reference_s;
    comm.all_gather(all.data(), static_cast<std::int64_t>(n * sizeof(double)), kernels::DType::u8);
    r.speed_reference_s = *std::max_element(all.begin(), all.end());
}

// On the CPU the baseline joins the measured breakdown as `overhead`, as the
// estimate predicts it (a GPU's device overhead does the same).
MemoryBreakdown with_baseline(MemoryBreakdown m, std::uint64_t baseline) {
    m.bytes[static_cast<std::size_t>(Component::overhead)] += baseline;
    m.peak += baseline;
    return m;
}

// Every rank's peak of one ledger; `m` becomes the breakdown of the rank with the highest, so
// that it still sums to its peak (ranks differ by their process baselines, and by shards).
std::vector<std::uint64_t> gather_highest(Comm& comm, MemoryBreakdown& m) {
    const auto n = static_cast<std::size_t>(comm.world_size());
    const auto me = static_cast<std::size_t>(comm.rank());
    if (n == 1) return {m.peak};
    constexpr std::size_t row = kComponentCount + 1;
    std::vector<std::uint64_t> all(n * row, 0);
    all[me * row] = m.peak;
    std::copy(m.bytes.begin(), m.bytes.end(), all.begin() + static_cast<std::ptrdiff_t>(me * row + 1));
    comm.all_gather(all.data(), static_cast<std::int64_t>(all.size() * sizeof(std::uint64_t)), kernels::DType::u8);
    std::vector<std::uint64_t> peaks(n, 0);
    for (std::size_t i = 0; i < n; ++i) peaks[i] = all[i * row];
    const auto top = static_cast<std::size_t>(std::max_element(peaks.begin(), peaks.end()) - peaks.begin());
    m.peak = peaks[top];
    std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(top * row + 1), kComponentCount, m.bytes.begin());
    return peaks;
}

// Every rank's peak in rank_peaks, the largest as the result's peak, and the
// losses averaged over ranks (each rank saw only its rows of the global batch).
void combine_over_ranks(Comm& comm, TrialResult& r) {
    r.rank_peaks = gather_highest(comm, r.memory);
    if (comm.world_size() == 1) return;
    std::vector<float> losses(r.losses.begin(), r.losses.end());
    comm.all_reduce(losses.data(), static_cast<std::int64_t>(losses.size()), kernels::DType::f32, ReduceOp::average);
    r.losses.assign(losses.begin(), losses.end());
}

// On a GPU, the device memory outside the allocator joins the breakdown and
// the peak as the `overhead` component (the estimator predicts it there too).
// `comm_bytes`: the device memory the trial's communicators hold (NCCL's buffers, the split groups' too).
MemoryBreakdown with_device_overhead(MemoryBreakdown m, const kernels::Backend& backend, std::uint64_t comm_bytes) {
    const std::optional<kernels::CudaMemoryStats> stats = kernels::cuda_memory_stats(backend);
    if (!stats) return m;
    const std::uint64_t overhead = device_overhead_bytes(*stats, m.peak) + comm_bytes;
    m.bytes[static_cast<std::size_t>(Component::overhead)] += overhead;
    m.peak += overhead;
    return m;
}

// The bytes each rank may use: the config's limit, else the device's memory
// on a GPU, else what the machine can give now, shared by the ranks on it
// (CPU ranks all run on this host). 0 when nothing is known (no limit).
std::uint64_t memory_limit(const TrialConfig& c, const TrialBackend& device) {
    if (c.memory_limit > 0) return c.memory_limit;
    if (device.cpu_threads == 0) return device.hardware.memory_bytes;
    return host_available_bytes().value_or(0) / std::max<std::uint32_t>(parallel_plan(c).world(), 1);
}

// A trial the estimator says cannot fit would allocate until it fails (on a
// CPU: until the machine swaps); it ends as oom before allocating anything.
void refuse_predicted_oom(std::uint64_t predicted_peak, std::uint64_t limit) {
    if (limit == 0 || predicted_peak <= limit) return;
    throw OutOfMemoryError(predicted_peak, 0,
                           fmt::format("oom-predicted: the estimate needs {} per rank and {} may be used; --force "
                                       "runs it anyway",
                                       format_bytes(predicted_peak), format_bytes(limit)));
}

// The trial on a backend that exists and a communicator: every error becomes a status.
TrialResult run_on(const TrialConfig& config, const TrialOptions& options, const TrialBackend& device, Comm& comm,
                   TrialDetails* details);

}  // namespace

TrialResult unrun(const TrialConfig& config, TrialStatus status, const std::string& reason) {
    TrialResult r;
    r.config = config;
    r.status = status;
    r.reason = reason;
    return r;
}

TrialResult result_of_current_exception(const TrialConfig& config) {
    try {
        throw;
    } catch (const InvalidTrial& e) {
        return unrun(config, TrialStatus::invalid, e.what());
    } catch (const OutOfMemoryError& e) {
        TrialResult r = unrun(config, TrialStatus::oom, e.what());
        r.oom_requested = e.requested();
        r.oom_live = e.live();
        return r;
    } catch (const std::exception& e) {
        return unrun(config, TrialStatus::failed, e.what());
    }
}

bool uses_cuda(BackendKind backend) {
    return backend == BackendKind::cuda || (backend == BackendKind::automatic && !query_devices().devices.empty());
}

// A GPU rank binds to device = local rank.
void check_gpu_for_rank(int local_rank, int ranks) {
    const DeviceQuery q = query_devices();
    if (static_cast<std::size_t>(local_rank) < q.devices.size()) return;
    throw BackendError(
        fmt::format("{} ranks need one GPU each, but {} visible here{}; ask for at most {} "
                    "(--gpus / [hardware] gpus) or make more visible (CUDA_VISIBLE_DEVICES)",
                    ranks, q.devices.size(), q.devices.empty() ? " (" + q.why_none + ")" : "", q.devices.size()));
}

void check_runnable(const TrialConfig& c) {
    if (auto bad = invalid_reason(c)) throw InvalidTrial(bad->reason);
    if (auto field = train::trainer_unsupported(c)) throw InvalidTrial(*field);
    if (auto why = train::pipeline_unsupported(c)) throw InvalidTrial(*why);
}

double step_flops(const TrialConfig& c) { return model_flops_per_token(c.model, c) * tokens_per_step(c); }

TrialResult run_trial(const TrialConfig& config, const TrialOptions& options, TrialDetails* details) {
    if (parallel_plan(config).world() <= 1) {
        SingleRankComm comm;
        return run_trial(config, options, comm, details);
    }
    try {
        check_runnable(config);
        const RankEnvironment env = rank_environment();
        if (!env.under_launcher || env.ranks != static_cast<int>(parallel_plan(config).world()))
            throw InvalidTrial(
                fmt::format("world_size {} needs {} ranks started by mpirun or srun (`tune trial "
                            "--gpus {}` launches them); this process is rank {} of {}",
                            parallel_plan(config).world(), parallel_plan(config).world(), parallel_plan(config).world(),
                            env.rank, env.ranks));
        const MpiRuntime runtime;
        // A failing rank cannot tell the others, which may wait in a collective
        // (or in NCCL's setup) forever: it reports and ends the job.
        auto end_job_on_failure = [&](TrialResult r) {
            if ((r.status == TrialStatus::oom || r.status == TrialStatus::failed) && options.on_rank_failure) {
                r.reason = fmt::format("rank {} of {}: {}", runtime.rank(), runtime.world_size(), r.reason);
                runtime.abort_job(options.on_rank_failure(r));  // before any other MPI call can block
            }
            return r;
        };
        const bool gpu = wants_cuda(options);
        TrialBackend device;
        try {
            if (gpu) check_gpu_for_rank(env.local_rank, env.ranks);
            device = make_backend(options, env.local_rank);
        } catch (...) {
            return end_job_on_failure(result_of_current_exception(config));
        }
        // GPU ranks talk over NCCL on the CUDA backend's stream (ordered with
        // its kernels, device = local rank); CPU ranks over MPI. Declared after
        // the backend, so it is destroyed first.
        // A rank whose NCCL init fails must end the job too: its peers wait in
        // ncclCommInitRank for it forever.
        std::unique_ptr<Comm> comm;
        try {
            if (options.fault_comm_init) throw std::runtime_error("test fault: the communicator's init failed");
            comm = gpu ? make_nccl_comm(runtime, env.local_rank, device.backend.get())
                       : std::make_unique<MpiComm>(runtime);
        } catch (const std::exception& e) {
            return end_job_on_failure(unrun(config, TrialStatus::failed, e.what()));
        }
        return end_job_on_failure(run_on(config, options, device, *comm, details));
    } catch (const ConfigError&) {
        throw;       // an unreadable --init or --tokens file is bad input (exit 2), not a trial outcome
    } catch (...) {  // invalid, or MPI or NCCL would not start
        return result_of_current_exception(config);
    }
}

TrialResult run_trial(const TrialConfig& config, const TrialOptions& options, Comm& comm, TrialDetails* details) {
    TrialBackend device;
    try {
        check_runnable(config);  // an impossible combination says so before any device is touched
        device = make_backend(options, rank_environment().local_rank);
    } catch (...) {
        return result_of_current_exception(config);
    }
    return run_on(config, options, device, comm, details);
}

namespace {

// Hugging Face weights and PEFT adapters are whole models; a tensor-parallel rank holds its shard.
std::optional<std::string> whole_files_unsupported(const TrialConfig& c, const TrialOptions& o) {
    if (c.tensor_parallel <= 1 && c.pipeline_parallel <= 1) return std::nullopt;
    const char* flag = o.init_dir           ? "--init"
                       : o.init_adapter_dir ? "--init-adapter"
                       : o.save_adapter_dir ? "--save-adapter"
                                            : nullptr;
    if (flag == nullptr) return std::nullopt;
    if (c.tensor_parallel > 1)
        return fmt::format(
            "tensor_parallel {}: {} reads or writes a whole model, and tune's engine does not split or "
            "gather one across its tensor-parallel ranks; run it with tensor_parallel 1",
            c.tensor_parallel, flag);
    return fmt::format(
        "pipeline_parallel {}: {} reads or writes a whole model, and tune's engine does not split or "
        "gather one across its pipeline stages; run it with pipeline_parallel 1",
        c.pipeline_parallel, flag);
}

TrialResult run_on(const TrialConfig& config, const TrialOptions& options, const TrialBackend& device, Comm& comm,
                   TrialDetails* details) {
    TrialResult r;
    r.config = config;
    TrialDetails local;
    TrialDetails& d = details != nullptr ? *details : local;
    try {
        check_runnable(config);
        if (auto why = offload_unsupported(*device.backend, config)) throw InvalidTrial(*why);
        if (auto why = whole_files_unsupported(config, options)) throw InvalidTrial(*why);
        if (comm.world_size() != static_cast<int>(parallel_plan(config).world()))
            throw InvalidTrial(fmt::format("world_size {} but the communicator has {} ranks",
                                           parallel_plan(config).world(), comm.world_size()));
        TrialConfig c = config;
        const std::uint64_t limit = memory_limit(config, device);
        // The CPU allocator enforces it too; a GPU's own allocator knows its device.
        if (device.cpu_threads > 0) c.memory_limit = limit;
        kernels::Backend& backend = *device.backend;
        if (options.fault_oom) c.memory_limit = 1;
        const std::unique_ptr<TokenSource> tokens = token_source(c, options);
        std::optional<HostParams> init;
        const ParamLayout layout = make_param_layout(c.model, parallel_plan(c).world(), c.adam8bit_block);
        if (options.init_dir) init = load_hf_weights(*options.init_dir, layout);
        std::optional<HostParams> adapters;
        const ParamLayout adapter_layout =
            make_adapter_layout(c.model, c.lora_rank, c.lora_targets, parallel_plan(c).world(), c.adam8bit_block);
        if (options.init_adapter_dir) adapters = load_peft_adapter(*options.init_adapter_dir, adapter_layout);
        // The baseline: everything before the model's first allocation.
        MemoryWatch watch = watch_memory(device);
        const std::uint64_t baseline = device.cpu_threads > 0 ? watch.baseline() : 0;
        r.estimate = trial_estimate(config, device, baseline);
        if (!options.force) refuse_predicted_oom(limited_bytes(r.estimate->memory, device.hardware), limit);
        Trainer trainer(backend, comm, c, *tokens, init ? &*init : nullptr, adapters ? &*adapters : nullptr);
        if (!options.graphs) trainer.stop_micro_batch_graphs("turned off (--no-graphs)");
        std::uint64_t control_bytes = 0;  // the noise rule's own broadcasts, not the step's traffic
        try {
            run_steps(trainer, backend, comm, c, options, device.hardware, r, d, control_bytes);
        } catch (...) {
            r.memory = trainer.memory().peak_breakdown();
            throw;
        }
        if (options.save_adapter_dir && c.adapters()) {
            const HostParams trained = trainer.model().download_weights();  // collective when sharded
            if (comm.rank() == 0) save_peft_adapter(*options.save_adapter_dir, c, adapter_layout, trained);
        }
        // On the CPU the process holds both ledgers, and its host ledger is
        // not the device's: the real peak reported is the process's less it.
        // A GPU's real peak (cudaMemGetInfo) never sees pinned host memory.
        const std::uint64_t host_in_view = device.cpu_threads > 0 ? trainer.host_memory().peak() : 0;
        RealMemory real = watch.finish(trainer.memory().peak() + host_in_view);
        real.real_peak = real.real_peak > host_in_view ? real.real_peak - host_in_view : 0;
        r.memory = with_baseline(with_device_overhead(trainer.memory().peak_breakdown(), backend,
                                                      comm.device_bytes() + trainer.group_device_bytes()),
                                 baseline);
        if (c.offload != Offload::none) r.host_memory = trainer.host_memory().peak_breakdown();
        r.comm_bytes = (comm.bytes_moved() + trainer.group_bytes_moved() - control_bytes) / r.step_ms.size();
        combine_over_ranks(comm, r);
        if (c.offload != Offload::none) r.rank_host_peaks = gather_highest(comm, r.host_memory);
        combine_real_memory(comm, real, r);
        combine_speed_reference(comm, r);
        r.status = TrialStatus::ok;
        const auto skipped = std::count(d.skipped.begin(), d.skipped.end(), true);
        if (skipped > 0)
            r.reason = fmt::format("{} of {} steps skipped (fp16 overflow; loss scale now {:g})", skipped,
                                   r.step_ms.size(), trainer.loss_scale());
    } catch (const ConfigError&) {
        throw;  // an unreadable --init or --tokens file is bad input (exit 2), not a trial outcome
    } catch (const OutputFileError&) {
        throw;  // --save-adapter could not be written where the user asked (exit 2)
    } catch (...) {
        // What was measured up to the failure stays with the result.
        const TrialResult mapped = result_of_current_exception(config);
        r.status = mapped.status;
        r.reason = mapped.reason;
        r.oom_requested = mapped.oom_requested;
        r.oom_live = mapped.oom_live;
    }
    return r;
}

}  // namespace

}  // namespace tune::train

// One trial, start to end, in this process: build the backend and the
// trainer for a TrialConfig, run its steps with per-step logging (loss, time,
// tokens/s, MFU, memory), and turn the outcome into a TrialResult. Errors
// become statuses here: out of memory -> oom, an impossible combination ->
// invalid, anything else -> failed with the message.
#pragma once

#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/noise_rule.h"
#include "train/comm/comm.h"

namespace tune::train {

// A configuration the engine cannot express (status invalid, not an error).
class InvalidTrial : public std::runtime_error {
public:
    explicit InvalidTrial(const std::string& reason) : std::runtime_error(reason) {}
};

struct TrialOptions {
    std::optional<std::filesystem::path> init_dir;     // Hugging Face folder: config.json + model.safetensors
    std::optional<std::filesystem::path> tokens_file;  // little-endian uint32 token ids
    // lora/qlora: a PEFT adapter folder the adapters start from, and one they are written to at the end.
    std::optional<std::filesystem::path> init_adapter_dir, save_adapter_dir;
    int threads = 0;  // CPU backend threads; 0: OpenMP's default
    NoiseRule noise;  // more steps while the timed steps are noisy
    // cpu, cuda (fails as `failed` without a device) or automatic (CUDA when a
    // device is visible). Library callers get the CPU; `tune trial` defaults to auto.
    BackendKind backend = BackendKind::cpu;
    std::FILE* log = stderr;  // per-step lines; nullptr: quiet
    bool fault_nan = false;   // test hook: the loss of step 1 becomes NaN
    bool fault_oom = false;   // test hook: the first allocation fails
    bool fault_kill = false;  // test hook: SIGKILL itself after the first step
    bool force = false;       // run even when the estimate exceeds the memory limit
    // Micro-batches as CUDA graphs where they can be (train/micro_batch_graphs.h); false: eager.
    bool graphs = true;
    bool fault_comm_init = false;  // test hook: this rank's communicator fails to start
    // Multi-rank trials started by a launcher: a rank whose trial ends oom or
    // failed cannot tell the others, which may wait in a collective forever.
    // It hands its result to this (the CLI prints it) and the job is aborted
    // with the exit code returned. Unset: the result is returned as usual.
    std::function<int(const TrialResult&)> on_rank_failure;
};

// What the trial saw beyond TrialResult (tests and logs use it).
struct TrialDetails {
    std::vector<bool> skipped;       // per step: fp16 overflow, no update
    std::vector<float> loss_scales;  // per step: the loss scale it ran with
    std::vector<double> grad_norms;
    std::vector<double> speed_reference_ms;  // per step: the speed reference run before it
};

// Throws InvalidTrial when `c` cannot run on this engine, with the reason.
void check_runnable(const TrialConfig& c);

// Whether a trial with this --backend setting runs on CUDA here.
bool uses_cuda(BackendKind backend);
// One GPU per rank, never a shared one: throws BackendError naming the counts
// when local rank `local_rank` of `world_size` GPU ranks has no visible device
// (check local rank world_size - 1 to ask before starting any rank).
void check_gpu_for_rank(int local_rank, int ranks);

// The result of a trial that never ran or never reported: its config, status and reason.
TrialResult unrun(const TrialConfig& config, TrialStatus status, const std::string& reason);

// The one mapping from an exception to a trial's status, for use inside a
// catch block: InvalidTrial -> invalid, OutOfMemoryError -> oom (with the
// requested and live bytes), anything else -> failed, each with its message.
TrialResult result_of_current_exception(const TrialConfig& config);

// world_size 1 runs here; more ranks need this process to be one rank under
// mpirun/srun (rank_environment()), and then talk over MPI.
TrialResult run_trial(const TrialConfig& config, const TrialOptions& options, TrialDetails* details = nullptr);
// The same on a communicator the caller owns (its world size must match the config's).
TrialResult run_trial(const TrialConfig& config, const TrialOptions& options, Comm& comm,
                      TrialDetails* details = nullptr);

// Model FLOPs of one optimizer step over all ranks (estimate/model_flops.h: 6N, or 4N + 6N_adapter
// with a frozen base, plus attention), no recompute: what the measured MFU counts.
double step_flops(const TrialConfig& c);

}  // namespace tune::train

// NcclComm: built only with the CUDA backend (train/CMakeLists.txt); the
// factories' stand-ins for other builds are in comm_nccl_missing.cpp.
#include "train/comm/comm_nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/status.h"
#include "kernels/error.h"
#include "launch/launch.h"
#include "train/comm/comm_error.h"
#include "train/comm/comm_mpi.h"
#include "train/comm/comm_rules.h"
#include "train/comm/nccl_wait.h"

static_assert(sizeof(ncclUniqueId) == tune::train::kNcclIdBytes, "NcclId must hold an ncclUniqueId");

namespace tune::train {
namespace {

using kernels::DType;

// A failed NCCL call as a CommError: the call as written, file and line,
// NCCL's sentence for the code and, when a communicator exists, its last error.
// ncclInProgress is not a failure: a non-blocking communicator's call was
// accepted and finishes asynchronously (NcclComm::await polls for it).
void check_nccl_call(ncclResult_t status, const char* call, const char* file, int line, ncclComm_t comm = nullptr) {
    if (status == ncclSuccess || status == ncclInProgress) return;
    std::string message = kernels::cuda::describe(
        kernels::cuda::nccl_failure(static_cast<int>(status), kernels::cuda::CallSite{call, file, line}));
    // NCCL keeps the last error per thread too, so it can say why an init failed.
    const char* detail = ncclGetLastError(comm);
    const std::string why = detail != nullptr ? detail : "";
    if (!why.empty()) message += fmt::format(" ({})", why);
    // NCCL folds a failed allocation into these codes; its message says so.
    // Out of memory is the trial's `oom`, not `failed`.
    if ((status == ncclUnhandledCudaError || status == ncclSystemError) &&
        why.find("out of memory") != std::string::npos)
        throw OutOfMemoryError(0, 0, message);
    throw CommError(message);
}

#define TUNE_NCCL_COMM_CHECK(call) check_nccl_call((call), #call, __FILE__, __LINE__)
#define TUNE_NCCL_COMM_CHECK_ON(comm, call) check_nccl_call((call), #call, __FILE__, __LINE__, (comm))

ncclDataType_t nccl_type(DType t) {
    switch (t) {
        case DType::f32:
            return ncclFloat32;
        case DType::bf16:
            return ncclBfloat16;
        case DType::f16:
            return ncclFloat16;
        case DType::u8:
            return ncclUint8;
        case DType::i32:
            return ncclInt32;
    }
    throw CommError(fmt::format("nccl: no NCCL type for dtype {}", static_cast<int>(t)));
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::average ? ncclAvg : op == ReduceOp::max ? ncclMax : ncclSum; }

std::uint64_t bytes_of(std::int64_t count, DType t) {
    return static_cast<std::uint64_t>(count) * kernels::dtype_bytes(t);
}

// Whether NCCL can read `p` where it is: device (or managed) memory, not
// pageable or pinned host memory.
bool on_device(const void* p) {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
        cudaGetLastError();  // an unknown pointer is host memory to us; clear the error
        return false;
    }
    return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

// The communicator's asynchronous state as a poll: done, still in progress
// (a non-blocking init or call), or failed with NCCL's words for it.
NcclPoll async_state(ncclComm_t comm) {
    ncclResult_t async = ncclSuccess;
    const ncclResult_t status = ncclCommGetAsyncError(comm, &async);
    if (status != ncclSuccess) async = status;
    if (async == ncclSuccess) return {};
    if (async == ncclInProgress) return {NcclPoll::State::pending, ""};
    const char* detail = ncclGetLastError(comm);
    return {NcclPoll::State::failed,
            fmt::format("{}{}", ncclGetErrorString(async),
                        detail != nullptr && *detail != '\0' ? std::string(" (") + detail + ")" : std::string())};
}

WaitClock polling_clock() {
    WaitClock c;
    c.pause = [] { std::this_thread::sleep_for(std::chrono::microseconds(200)); };
    return c;
}

}  // namespace

bool nccl_compiled() { return true; }

int bind_local_device(int local_rank) {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess || count == 0) {
        cudaGetLastError();
        throw BackendError(fmt::format("local rank {} needs a CUDA device, but none is visible ({})", local_rank,
                                       status != cudaSuccess ? cudaGetErrorString(status) : "device count 0"));
    }
    const int device = std::max(local_rank, 0) % count;
    TUNE_CUDA_CHECK(cudaSetDevice(device));
    return device;
}

NcclId new_nccl_id() {
    ncclUniqueId raw;
    TUNE_NCCL_COMM_CHECK(ncclGetUniqueId(&raw));
    NcclId id{};
    std::memcpy(id.data(), raw.internal, id.size());
    return id;
}

struct NcclComm::State {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    bool own_stream = false;   // made here (no backend), destroyed here
    bool synchronous = false;  // no backend: every collective is synchronous (see NcclPlacement)
    int* scratch = nullptr;    // the barrier's one element
};

NcclComm::NcclComm(const NcclId& id, int rank, int ranks, const NcclPlacement& where)
    : state_(std::make_unique<State>()), rank_(rank), world_size_(ranks) {
    if (ranks < 1 || rank < 0 || rank >= ranks)
        throw CommError(fmt::format("nccl: rank {} of {} is not a rank", rank, ranks));
    if (std::all_of(id.begin(), id.end(), [](std::uint8_t b) { return b == 0; }))
        throw CommError("nccl: the NCCL id is all zeros (rank 0 could not create one, or TUNE_NCCL_ID is blank)");
    if (where.backend != nullptr) {
        state_->stream = static_cast<cudaStream_t>(kernels::cuda_stream(*where.backend));
        device_ = kernels::cuda_device(*where.backend);
        TUNE_CUDA_CHECK(cudaSetDevice(device_));
    } else {
        device_ = bind_local_device(where.local_rank);
        TUNE_CUDA_CHECK(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking));
        state_->own_stream = state_->synchronous = true;
    }
    try {
        // The barrier's element, and room for one element per rank (connect()).
        TUNE_CUDA_CHECK(cudaMalloc(&state_->scratch, sizeof(int) * static_cast<std::size_t>(ranks)));
        used_before_ = kernels::cuda_device_used_bytes(device_);
        ncclUniqueId raw;
        std::memcpy(raw.internal, id.data(), id.size());
        // Non-blocking init, polled with a deadline: a peer that never joins
        // (or fails) ends in CommError instead of a wait without end.
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        const ncclResult_t started = ncclCommInitRankConfig(&state_->comm, ranks, raw, rank, &config);
        if (started != ncclInProgress) TUNE_NCCL_COMM_CHECK_ON(state_->comm, started);
        await("init");
        connect();
    } catch (...) {
        if (state_->comm != nullptr) ncclCommAbort(state_->comm);
        if (state_->scratch != nullptr) cudaFree(state_->scratch);
        if (state_->own_stream) cudaStreamDestroy(state_->stream);
        throw;
    }
}

// A split shares its parent's device and stream (so its collectives keep the
// backend's order) and polls its creation with the same deadline as an init.
NcclComm::NcclComm(const NcclComm& parent, int color, int key)
    : state_(std::make_unique<State>()), device_(parent.device_) {
    if (color < 0) throw CommError(fmt::format("nccl: split color {} must not be negative", color));
    if (parent.state_->comm == nullptr) throw CommError("nccl: split of an aborted communicator");
    state_->stream = parent.state_->stream;
    state_->synchronous = parent.state_->synchronous;
    TUNE_CUDA_CHECK(cudaSetDevice(device_));
    try {
        // The barrier's element and one per rank, as many as the parent's (a group has no more), before
        // the measurement: device_bytes() is NCCL's alone, as after an init.
        TUNE_CUDA_CHECK(cudaMalloc(&state_->scratch, sizeof(int) * static_cast<std::size_t>(parent.world_size_)));
        used_before_ = kernels::cuda_device_used_bytes(device_);
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        const ncclResult_t started = ncclCommSplit(parent.state_->comm, color, key, &state_->comm, &config);
        if (started != ncclInProgress)
            TUNE_NCCL_COMM_CHECK_ON(state_->comm != nullptr ? state_->comm : parent.state_->comm, started);
        await("split");
        TUNE_NCCL_COMM_CHECK_ON(state_->comm, ncclCommCount(state_->comm, &world_size_));
        TUNE_NCCL_COMM_CHECK_ON(state_->comm, ncclCommUserRank(state_->comm, &rank_));
        connect();
    } catch (...) {
        if (state_->comm != nullptr) ncclCommAbort(state_->comm);
        if (state_->scratch != nullptr) cudaFree(state_->scratch);
        throw;
    }
}

std::unique_ptr<Comm> NcclComm::split(int color, int key) {
    synchronize();  // what the parent enqueued finishes before the group forms
    return std::unique_ptr<Comm>(new NcclComm(*this, color, key));
}

NcclComm::~NcclComm() {
    cudaSetDevice(device_);
    cudaStreamSynchronize(state_->stream);
    if (state_->comm != nullptr) ncclCommDestroy(state_->comm);
    cudaFree(state_->scratch);
    if (state_->own_stream) cudaStreamDestroy(state_->stream);
}

// One small collective of each kind, so NCCL sets up its connections and
// buffers now, before the trainer allocates, and what they cost on the
// device is measured (device_bytes(), part of the trial's `overhead`).
void NcclComm::connect() {
    ncclComm_t comm = state_->comm;
    cudaStream_t stream = state_->stream;
    int* d = state_->scratch;
    TUNE_NCCL_COMM_CHECK_ON(comm, ncclAllReduce(d, d, 1, ncclInt32, ncclSum, comm, stream));
    await("connect");
    TUNE_NCCL_COMM_CHECK_ON(comm, ncclReduceScatter(d, d + rank_, 1, ncclInt32, ncclSum, comm, stream));
    await("connect");
    TUNE_NCCL_COMM_CHECK_ON(comm, ncclAllGather(d + rank_, d, 1, ncclInt32, comm, stream));
    await("connect");
    TUNE_NCCL_COMM_CHECK_ON(comm, ncclBroadcast(d, d, 1, ncclInt32, 0, comm, stream));
    await("connect");
    synchronize();
    const std::uint64_t after = kernels::cuda_device_used_bytes(device_);
    device_bytes_ = after > used_before_ ? after - used_before_ : 0;
}

void NcclComm::abort_comm() {
    if (state_->comm != nullptr) ncclCommAbort(state_->comm);
    state_->comm = nullptr;
}

void NcclComm::await(const char* what) {
    if (state_->comm == nullptr) throw CommError(fmt::format("nccl: {} on an aborted communicator", what));
    ncclComm_t comm = state_->comm;
    wait_or_abort([comm] { return async_state(comm); }, nccl_timeout(), [this] { abort_comm(); }, what,
                  polling_clock());
}

// Polls the stream and NCCL's asynchronous error instead of blocking in
// cudaStreamSynchronize, which a failed peer would turn into a hang.
void NcclComm::synchronize() {
    if (state_->comm == nullptr) throw CommError("nccl: synchronize on an aborted communicator");
    ncclComm_t comm = state_->comm;
    cudaStream_t stream = state_->stream;
    wait_or_abort(
        [comm, stream] {
            const NcclPoll nccl = async_state(comm);
            if (nccl.state == NcclPoll::State::failed) return nccl;
            const cudaError_t q = cudaStreamQuery(stream);
            if (q == cudaErrorNotReady) return NcclPoll{NcclPoll::State::pending, ""};
            if (q != cudaSuccess) {
                cudaGetLastError();
                return NcclPoll{NcclPoll::State::failed, cudaGetErrorString(q)};
            }
            return nccl;
        },
        nccl_timeout(), [this] { abort_comm(); }, "synchronize", polling_clock());
}

// Enqueues `enqueue(device_buffer)` on the stream: directly on `buf` when it
// is device memory, else on a device copy of its `bytes` that is copied back
// and waited for. Without a backend the host waits for the device before and
// for the collective after.
// After each enqueue the communicator's asynchronous state is polled, so an
// error NCCL has already seen is raised here, not at a later hang.
template <class Enqueue>
void NcclComm::run(void* buf, std::uint64_t bytes, Enqueue&& enqueue) {
    if (state_->comm == nullptr) throw CommError("nccl: collective on an aborted communicator");
    TUNE_CUDA_CHECK(cudaSetDevice(device_));
    if (state_->synchronous) TUNE_CUDA_CHECK(cudaDeviceSynchronize());
    if (on_device(buf)) {
        enqueue(buf);
        await("collective");
        if (state_->synchronous) synchronize();
        return;
    }
    void* staged = nullptr;
    TUNE_CUDA_CHECK(cudaMalloc(&staged, bytes));
    try {
        TUNE_CUDA_CHECK(cudaMemcpyAsync(staged, buf, bytes, cudaMemcpyHostToDevice, state_->stream));
        enqueue(staged);
        await("collective");
        TUNE_CUDA_CHECK(cudaMemcpyAsync(buf, staged, bytes, cudaMemcpyDeviceToHost, state_->stream));
        synchronize();
    } catch (...) {
        cudaStreamSynchronize(state_->stream);
        cudaFree(staged);
        throw;
    }
    TUNE_CUDA_CHECK(cudaFree(staged));
}

void NcclComm::all_reduce(void* buf, std::int64_t count, DType dtype, ReduceOp op) {
    require_summable(dtype, op, "all_reduce");
    if (count < 0) throw CommError(fmt::format("all_reduce: negative count {}", count));
    if (count > 0) {
        ncclComm_t comm = state_->comm;
        cudaStream_t stream = state_->stream;
        run(buf, bytes_of(count, dtype), [&](void* d) {
            TUNE_NCCL_COMM_CHECK_ON(comm, ncclAllReduce(d, d, static_cast<std::size_t>(count), nccl_type(dtype),
                                                        nccl_op(op), comm, stream));
        });
    }
    bytes_moved_ += ring_bytes(count, dtype, world_size_, 2);
}

void NcclComm::reduce_scatter(void* buf, std::int64_t count, DType dtype, ReduceOp op) {
    require_summable(dtype, op, "reduce_scatter");
    const std::int64_t part = shard_count_of(count, world_size_, "reduce_scatter");
    if (part > 0) {
        ncclComm_t comm = state_->comm;
        cudaStream_t stream = state_->stream;
        const std::uint64_t offset = bytes_of(static_cast<std::int64_t>(rank_) * part, dtype);
        // NCCL's in-place form: recvbuff = sendbuff + rank * recvcount.
        run(buf, bytes_of(count, dtype), [&](void* d) {
            void* mine = static_cast<unsigned char*>(d) + offset;
            TUNE_NCCL_COMM_CHECK_ON(comm, ncclReduceScatter(d, mine, static_cast<std::size_t>(part), nccl_type(dtype),
                                                            nccl_op(op), comm, stream));
        });
    }
    bytes_moved_ += ring_bytes(count, dtype, world_size_, 1);
}

void NcclComm::all_gather(void* buf, std::int64_t count, DType dtype) {
    const std::int64_t part = shard_count_of(count, world_size_, "all_gather");
    if (part > 0) {
        ncclComm_t comm = state_->comm;
        cudaStream_t stream = state_->stream;
        const std::uint64_t offset = bytes_of(static_cast<std::int64_t>(rank_) * part, dtype);
        // NCCL's in-place form: sendbuff = recvbuff + rank * sendcount.
        run(buf, bytes_of(count, dtype), [&](void* d) {
            const void* mine = static_cast<const unsigned char*>(d) + offset;
            TUNE_NCCL_COMM_CHECK_ON(
                comm, ncclAllGather(mine, d, static_cast<std::size_t>(part), nccl_type(dtype), comm, stream));
        });
    }
    bytes_moved_ += ring_bytes(count, dtype, world_size_, 1);
}

void NcclComm::broadcast(void* buf, std::int64_t count, DType dtype, int root) {
    if (root < 0 || root >= world_size_) throw CommError("broadcast: root " + std::to_string(root) + " is not a rank");
    if (count < 0) throw CommError(fmt::format("broadcast: negative count {}", count));
    if (count > 0) {
        ncclComm_t comm = state_->comm;
        cudaStream_t stream = state_->stream;
        run(buf, bytes_of(count, dtype), [&](void* d) {
            TUNE_NCCL_COMM_CHECK_ON(
                comm, ncclBroadcast(d, d, static_cast<std::size_t>(count), nccl_type(dtype), root, comm, stream));
        });
    }
    bytes_moved_ += broadcast_bytes(count, dtype, world_size_);
}

namespace {

// The device buffers a batch runs on: each op's own, or a staged copy of a host one, freed on every path.
class StagedOps {
public:
    StagedOps(std::span<const P2POp> ops, cudaStream_t stream) : ops_(ops.begin(), ops.end()), stream_(stream) {
        for (P2POp& op : ops_) {
            if (on_device(op.buf) || op.count == 0) continue;
            const std::uint64_t bytes = bytes_of(op.count, op.dtype);
            void* copy = nullptr;
            TUNE_CUDA_CHECK(cudaMalloc(&copy, bytes));
            staged_.push_back({op.buf, copy, bytes, op.kind});
            if (op.kind == P2POp::Kind::send)
                TUNE_CUDA_CHECK(cudaMemcpyAsync(copy, op.buf, bytes, cudaMemcpyHostToDevice, stream_));
            op.buf = copy;
        }
    }
    ~StagedOps() {
        if (staged_.empty()) return;
        cudaStreamSynchronize(stream_);
        for (const Staged& s : staged_) cudaFree(s.device);
    }
    StagedOps(const StagedOps&) = delete;
    StagedOps& operator=(const StagedOps&) = delete;

    const std::vector<P2POp>& ops() const { return ops_; }
    bool any() const { return !staged_.empty(); }
    // Enqueues the copies of what the staged receives brought back to their host buffers.
    void copy_back() const {
        for (const Staged& s : staged_)
            if (s.kind == P2POp::Kind::recv)
                TUNE_CUDA_CHECK(cudaMemcpyAsync(s.host, s.device, s.bytes, cudaMemcpyDeviceToHost, stream_));
    }

private:
    struct Staged {
        void* host;
        void* device;
        std::uint64_t bytes;
        P2POp::Kind kind;
    };
    std::vector<P2POp> ops_;
    std::vector<Staged> staged_;
    cudaStream_t stream_;
};

}  // namespace

void NcclComm::send_recv(std::span<const P2POp> ops) {
    check_p2p(ops, rank_, world_size_);
    if (state_->comm == nullptr) throw CommError("nccl: send_recv on an aborted communicator");
    TUNE_CUDA_CHECK(cudaSetDevice(device_));
    if (state_->synchronous) TUNE_CUDA_CHECK(cudaDeviceSynchronize());
    ncclComm_t comm = state_->comm;
    cudaStream_t stream = state_->stream;
    const StagedOps staged(ops, stream);
    TUNE_NCCL_COMM_CHECK_ON(comm, ncclGroupStart());
    for (const P2POp& op : staged.ops()) {
        if (op.count == 0) continue;
        const auto n = static_cast<std::size_t>(op.count);
        if (op.kind == P2POp::Kind::send)
            TUNE_NCCL_COMM_CHECK_ON(comm, ncclSend(op.buf, n, nccl_type(op.dtype), op.peer, comm, stream));
        else
            TUNE_NCCL_COMM_CHECK_ON(comm, ncclRecv(op.buf, n, nccl_type(op.dtype), op.peer, comm, stream));
    }
    TUNE_NCCL_COMM_CHECK_ON(comm, ncclGroupEnd());
    await("send_recv");
    staged.copy_back();
    if (state_->synchronous || staged.any()) synchronize();
    bytes_moved_ += sent_bytes(ops);
}

void NcclComm::barrier() {
    ncclComm_t comm = state_->comm;
    cudaStream_t stream = state_->stream;
    run(state_->scratch, sizeof(int),
        [&](void* d) { TUNE_NCCL_COMM_CHECK_ON(comm, ncclAllReduce(d, d, 1, ncclInt32, ncclSum, comm, stream)); });
    synchronize();
}

std::unique_ptr<Comm> make_nccl_comm(const NcclId& id, int rank, int ranks, const NcclPlacement& where) {
    return std::make_unique<NcclComm>(id, rank, ranks, where);
}

std::unique_ptr<Comm> make_nccl_comm(const MpiRuntime& runtime, const NcclPlacement& where) {
    NcclId id{};
    if (auto from_env = nccl_id_from_environment()) {
        id = *from_env;
    } else {
        // Rank 0 makes the id; a failure there travels as an all-zero id, so
        // the others raise instead of waiting in the communicator's init.
        std::string failure;
        if (runtime.rank() == 0) {
            try {
                id = new_nccl_id();
            } catch (const std::exception& e) {
                failure = e.what();
                id.fill(0);
            }
        }
        MpiComm mpi(runtime);
        mpi.broadcast(id.data(), static_cast<std::int64_t>(id.size()), DType::u8, 0);
        if (!failure.empty()) throw CommError(failure);
        if (std::all_of(id.begin(), id.end(), [](std::uint8_t b) { return b == 0; }))
            throw CommError("nccl: rank 0 could not create the NCCL id (see rank 0's error)");
    }
    return make_nccl_comm(id, runtime.rank(), runtime.world_size(), where);
}

std::unique_ptr<Comm> make_nccl_comm(const MpiRuntime& runtime, int local_rank, kernels::Backend* backend) {
    return make_nccl_comm(runtime, NcclPlacement{local_rank, backend});
}

std::unique_ptr<Comm> make_nccl_comm_from_environment(kernels::Backend* backend) {
    const RankEnvironment env = rank_environment();
    const auto id = nccl_id_from_environment();
    if (!id)
        throw CommError(
            fmt::format("nccl: {} is not set: without MPI the launcher must hand every rank the id "
                        "(hex, from rank 0's ncclGetUniqueId)",
                        kNcclIdVariable));
    return make_nccl_comm(*id, env.rank, env.ranks, NcclPlacement{env.local_rank, backend});
}

}  // namespace tune::train

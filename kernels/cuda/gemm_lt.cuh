// GEMMs through cuBLASLt with fp32 accumulation. Row-major C = A @ B is run
// as the column-major C^T = B^T A^T, so no data moves. Each distinct problem
// (GemmKey) gets a plan once: descriptors, layouts and an algorithm chosen by
// timing the heuristic's candidates with CUDA events (into C, a scratch copy,
// or, for an accumulating GEMM too large to copy, on its own first calls);
// later calls reuse it.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "kernels/backend.h"
#include "kernels/cuda/host/algo_cache.h"
#include "kernels/cuda/host/shape_checks.h"
#include "kernels/cuda/memory_pool.cuh"
#include "kernels/workspace_bytes.h"

namespace tune::kernels::cuda {

struct GemmOptions {
    bool time_candidates = true;
    int candidates = 8;
    std::uint64_t cache_entries = 1024;
    std::uint64_t tuning_scratch_limit = 64ull << 20;
};

class GemmLt {
public:
    static constexpr std::uint64_t kWorkspaceBytes = workspace::kCudaGemmBytes;

    GemmLt(cudaStream_t stream, MemoryPool& pool, GemmOptions options);
    ~GemmLt();
    GemmLt(const GemmLt&) = delete;
    GemmLt& operator=(const GemmLt&) = delete;

    void run(const GemmArgs& args, Workspace ws);

    const AlgoCacheStats& cache_stats() const;
    std::uint64_t tuning_bytes() const { return tuning_bytes_; }

    struct Plan;

private:
    Plan make_plan(const GemmKey& key, const GemmArgs& args, Workspace ws);
    void choose_algorithm(Plan& plan, const GemmArgs& args, Workspace ws, const cublasLtMatmulHeuristicResult_t* found,
                          int count);
    // The fastest of the candidates, each run writing D = d.
    void pick_fastest(Plan& plan, const GemmArgs& args, Workspace ws, const cublasLtMatmulHeuristicResult_t* found,
                      int count, void* d);
    float time_algorithm(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const GemmArgs& args, void* d,
                         Workspace ws);
    void run_trying(Plan& plan, const GemmArgs& args, Workspace ws);
    cublasStatus_t launch(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const GemmArgs& args, void* d,
                          Workspace ws, std::uint64_t workspace);

    cudaStream_t stream_;
    MemoryPool& pool_;
    GemmOptions options_;
    cublasLtHandle_t handle_ = nullptr;
    std::unique_ptr<AlgoCache<Plan>> cache_;
    std::uint64_t tuning_bytes_ = 0;
};

}  // namespace tune::kernels::cuda

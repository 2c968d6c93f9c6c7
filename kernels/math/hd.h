#pragma once
// TUNE_HD marks the element-wise rules shared by the CPU and CUDA backends:
// __host__ __device__ under nvcc, plain (inline is written at each use) for
// the host compiler, so both backends compile the very same arithmetic.
#if defined(__CUDACC__)
#define TUNE_HD __host__ __device__
#else
#define TUNE_HD
#endif

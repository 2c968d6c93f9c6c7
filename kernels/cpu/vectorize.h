// Internal to the CPU backend: hot loops are compiled twice, for x86-64-v3
// (AVX2, FMA) and the baseline, and the loader picks one per machine. Such
// loops live in small functions marked TUNE_CPU_CLONES and called from
// inside the OpenMP regions (an OpenMP region's body is outlined into a
// function that would not inherit the attribute). Also: conversion of a run
// of elements between any float storage and fp32, dispatched once per run.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/cpu/typed.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TUNE_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define TUNE_CPU_CLONES
#endif

namespace tune::kernels::cpu {

// Reductions with a fixed number of interleaved partial results: plain loops
// that vectorize in every clone (an `omp simd` reduction is sized for the
// baseline target and stays scalar in the AVX2 clone) and sum in the same
// order whichever clone runs.
inline constexpr std::int64_t kLanes = 8;

// sum over j < n of term(j).
template <class Term>
inline float lane_sum(std::int64_t n, Term&& term) {
    float acc[kLanes] = {};
    std::int64_t j = 0;
    for (; j + kLanes <= n; j += kLanes)
        for (std::int64_t l = 0; l < kLanes; ++l) acc[l] += term(j + l);
    for (; j < n; ++j) acc[0] += term(j);
    float total = 0;
    for (float a : acc) total += a;
    return total;
}

// max over j < n of x[j] (-inf when n == 0; nan inputs are skipped).
inline float lane_max(const float* x, std::int64_t n) {
    float acc[kLanes];
    for (float& a : acc) a = -std::numeric_limits<float>::infinity();
    std::int64_t j = 0;
    for (; j + kLanes <= n; j += kLanes)
        for (std::int64_t l = 0; l < kLanes; ++l) acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
    for (; j < n; ++j) acc[0] = x[j] > acc[0] ? x[j] : acc[0];
    float m = acc[0];
    for (float a : acc) m = a > m ? a : m;
    return m;
}

template <class T>
TUNE_CPU_CLONES void load_run(const T* src, std::int64_t n, float* dst) {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = load(src, i);
}

template <class T>
TUNE_CPU_CLONES void store_run(T* dst, std::int64_t n, const float* src) {
    for (std::int64_t i = 0; i < n; ++i) store(dst, i, src[i]);
}

// dst[0, n) = elements [begin, begin + n) of a buffer of dtype t, as fp32.
inline void load_block(const void* base, DType t, std::int64_t begin, std::int64_t n, float* dst) {
    with_float_type(t, [&](auto v) { load_run(static_cast<const decltype(v)*>(base) + begin, n, dst); });
}

inline void store_block(void* base, DType t, std::int64_t begin, std::int64_t n, const float* src) {
    with_float_type(t, [&](auto v) { store_run(static_cast<decltype(v)*>(base) + begin, n, src); });
}

}  // namespace tune::kernels::cpu

// The per-shape cache of GEMM plans: cuBLASLt descriptors and the algorithm
// chosen by timing the heuristic's candidates cost far more than a GEMM of
// training size, so each distinct problem is planned once and reused. Plain
// C++ (no CUDA headers): the keying and eviction are tested on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>

#include "kernels/backend.h"

namespace tune::kernels::cuda {

// Everything about a GEMM call that can change which algorithm is valid or
// fastest: shape, transposes, leading dimensions, batch strides, dtypes,
// pointer alignment (cuBLASLt algorithms assume it) and the workspace cap.
// alpha, beta and the pointers themselves do not.
struct GemmKey {
    std::int64_t m = 0, n = 0, k = 0;
    std::int64_t lda = 0, ldb = 0, ldc = 0;
    std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
    std::int64_t batch = 1;
    bool trans_a = false, trans_b = false;
    DType a_dtype = DType::f32, b_dtype = DType::f32, c_dtype = DType::f32;
    std::uint16_t align_a = 0, align_b = 0, align_c = 0;  // bytes, powers of two up to 256
    std::uint64_t workspace_cap = 0;
};

// Field by field (written out: .cu files are C++17, no defaulted ==).
bool operator==(const GemmKey& a, const GemmKey& b);
inline bool operator!=(const GemmKey& a, const GemmKey& b) { return !(a == b); }

// The largest power of two (at most 256) dividing the address.
std::uint16_t pointer_alignment(const void* p);

// The alignment every matrix of a strided batch keeps: the pointer's,
// lowered to what the stride in bytes preserves (matrix i starts at
// p + i * stride). The heuristic is promised this, not the base pointer's:
// an algorithm that assumes 256 bytes would misread a batch 1440 bytes apart.
std::uint16_t batch_alignment(const void* p, std::int64_t stride, DType t, bool batched);

GemmKey make_gemm_key(const GemmArgs& args, std::uint64_t workspace_cap);

struct GemmKeyHash {
    std::size_t operator()(const GemmKey& key) const;
};

// "m=4096 n=4096 k=1024 NT bf16*bf16->f32 batch=1 lda=..." for logs and errors.
std::string to_string(const GemmKey& key);

struct AlgoCacheStats {
    std::uint64_t hits = 0, misses = 0, evictions = 0;
};

// Least-recently-used map from GemmKey to Entry (which owns its descriptors
// and releases them in its destructor when evicted). A training step uses a
// few dozen shapes; the capacity only bounds pathological callers.
template <class Entry>
class AlgoCache {
public:
    explicit AlgoCache(std::size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

    // The entry for key, now the most recently used, or nullptr (a miss).
    Entry* find(const GemmKey& key) {
        const auto it = index_.find(key);
        if (it == index_.end()) {
            ++stats_.misses;
            return nullptr;
        }
        ++stats_.hits;
        order_.splice(order_.begin(), order_, it->second);
        return &it->second->second;
    }

    // Stores entry under key (replacing an existing one), evicting the least
    // recently used entry when full. Returns the stored entry.
    Entry& insert(const GemmKey& key, Entry entry) {
        if (const auto it = index_.find(key); it != index_.end()) {
            order_.erase(it->second);
            index_.erase(it);
        }
        if (order_.size() >= capacity_) {
            index_.erase(order_.back().first);
            order_.pop_back();
            ++stats_.evictions;
        }
        order_.emplace_front(key, std::move(entry));
        index_.emplace(key, order_.begin());
        return order_.front().second;
    }

    bool contains(const GemmKey& key) const { return index_.count(key) != 0; }
    std::size_t size() const { return order_.size(); }
    std::size_t capacity() const { return capacity_; }
    const AlgoCacheStats& stats() const { return stats_; }
    void clear() {
        index_.clear();
        order_.clear();
    }

private:
    std::size_t capacity_;
    std::list<std::pair<GemmKey, Entry>> order_;  // most recently used first
    std::unordered_map<GemmKey, typename std::list<std::pair<GemmKey, Entry>>::iterator, GemmKeyHash> index_;
    AlgoCacheStats stats_;
};

}  // namespace tune::kernels::cuda

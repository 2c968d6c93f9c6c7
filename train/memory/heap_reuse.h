// The C allocator's policy for a process that runs collectives: freed heap
// blocks stay with the process for the next request of their size.
//
// By default glibc maps a block of 128 KiB or more on its own and unmaps it
// when freed, and gives the top of the heap back once 128 KiB of it are free,
// so a buffer MPI or the communicator allocates for every collective (a
// reduce-scatter's temporaries of a layer's part) comes back as fresh pages,
// one fault per 4 KiB, every call: a cost no probe prices, and whether a call
// pays it depends on where the heap's top happens to lie.
#pragma once

#include <cstdint>

namespace tune::train {

// Blocks below this come from the heap, and up to twice this much free heap is kept.
inline constexpr std::uint64_t kHeapReuseBytes = std::uint64_t{4} << 20;

// Sets that policy for this process (glibc's mallopt; elsewhere nothing). Call
// before the allocations it should cover, e.g. before MPI starts.
void keep_freed_heap_blocks();

}  // namespace tune::train

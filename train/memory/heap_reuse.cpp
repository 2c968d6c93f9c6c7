#include "train/memory/heap_reuse.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tune::train {

void keep_freed_heap_blocks() {
#if defined(__GLIBC__)
    // Setting either turns off glibc's own adjustment of both, so both are set.
    mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHeapReuseBytes));
    mallopt(M_TRIM_THRESHOLD, static_cast<int>(2 * kHeapReuseBytes));
#endif
}

}  // namespace tune::train

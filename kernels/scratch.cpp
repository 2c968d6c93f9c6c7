#include "kernels/scratch.h"

#include <cstring>

namespace tune::kernels {

Scratch::Scratch(Backend& b, std::uint64_t bytes, ScratchPlace where) : backend(b), bytes_(bytes), where_(where) {
    if (bytes == 0) return;
    if (where == ScratchPlace::host) {
        ptr = b.allocate_host(bytes);
        std::memset(ptr, 0, bytes);
    } else {
        ptr = b.allocate(bytes);
        b.fill_zero(ptr, bytes);
    }
}

Scratch::~Scratch() {
    if (ptr == nullptr) return;
    if (where_ == ScratchPlace::host)
        backend.deallocate_host(ptr, bytes_);
    else
        backend.deallocate(ptr, bytes_);
}

}  // namespace tune::kernels

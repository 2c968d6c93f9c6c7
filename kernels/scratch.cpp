#include "kernels/scratch.h"

namespace tune::kernels {

Scratch::Scratch(Backend& b, std::uint64_t bytes) : backend(b), bytes_(bytes) {
    if (bytes > 0) {
        ptr = b.allocate(bytes);
        b.fill_zero(ptr, bytes);
    }
}

Scratch::~Scratch() {
    if (ptr) backend.deallocate(ptr, bytes_);
}

}  // namespace tune::kernels

// A zero-filled backend buffer freed when it goes out of scope: what the
// probes and the speed reference time their ops on (their values do not
// matter, only that they are the backend's memory).
#pragma once

#include <cstdint>

#include "kernels/backend.h"

namespace tune::kernels {

// Where a scratch buffer lives: the backend's device memory, or its host memory (Backend::allocate_host).
enum class ScratchPlace { device, host };

class Scratch {
public:
    // No allocation for 0 bytes (ptr stays null).
    Scratch(Backend& b, std::uint64_t bytes, ScratchPlace where = ScratchPlace::device);
    ~Scratch();
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

    Backend& backend;
    void* ptr = nullptr;

private:
    std::uint64_t bytes_;
    ScratchPlace where_;
};

}  // namespace tune::kernels

// A zero-filled backend buffer freed when it goes out of scope: what the
// probes and the speed reference time their ops on (their values do not
// matter, only that they are the backend's memory).
#pragma once

#include <cstdint>

#include "kernels/backend.h"

namespace tune::kernels {

class Scratch {
public:
    Scratch(Backend& b, std::uint64_t bytes);  // no allocation for 0 bytes (ptr stays null)
    ~Scratch();
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

    Backend& backend;
    void* ptr = nullptr;

private:
    std::uint64_t bytes_;
};

}  // namespace tune::kernels

// A collective failed or was asked for something it cannot do (a count that
// does not split into equal shards, a reduction over quantized bytes). The
// trial boundary maps it, like any non-OOM error, to status `failed`.
#pragma once

#include <stdexcept>
#include <string>

namespace tune::train {

class CommError : public std::runtime_error {
public:
    explicit CommError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace tune::train

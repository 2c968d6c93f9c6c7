// The components a rank's memory is counted in, and bytes per component: the
// one array the estimator's phases, a trial's measured breakdown and the
// records share (MemoryBreakdown adds the peak to it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tune {

enum class Component : std::uint8_t { params, master, grads, optim, activations, logits, workspace, comm, overhead };
inline constexpr std::size_t kComponentCount = 9;
inline constexpr std::array<Component, kComponentCount> kComponents{
    Component::params, Component::master,    Component::grads, Component::optim,   Component::activations,
    Component::logits, Component::workspace, Component::comm,  Component::overhead};
inline std::string_view to_string(Component c) {
    constexpr std::array<std::string_view, kComponentCount> names{
        "params", "master", "grads", "optim", "activations", "logits", "workspace", "comm", "overhead"};
    return names[static_cast<std::size_t>(c)];
}

// Bytes per component at one moment of a step.
struct ComponentBytes {
    std::array<std::uint64_t, kComponentCount> bytes{};

    std::uint64_t& operator[](Component c) { return bytes[static_cast<std::size_t>(c)]; }
    std::uint64_t operator[](Component c) const { return bytes[static_cast<std::size_t>(c)]; }
    std::uint64_t total() const {
        std::uint64_t sum = 0;
        for (auto b : bytes) sum += b;
        return sum;
    }
    bool operator==(const ComponentBytes&) const = default;
};

}  // namespace tune

#include "core/pipeline_split.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

namespace tune {

bool split_counts_embedding(PipelineSplit s) {
    return s == PipelineSplit::embedding || s == PipelineSplit::embedding_loss;
}
bool split_counts_loss(PipelineSplit s) { return s == PipelineSplit::loss || s == PipelineSplit::embedding_loss; }

std::uint32_t pipeline_counted_layers(std::uint32_t layers, std::uint32_t p, std::uint32_t v, PipelineSplit split) {
    const std::uint32_t chunks = std::max<std::uint32_t>(p * v, 1);
    return (layers + split_counts_embedding(split) + split_counts_loss(split)) / chunks;
}

std::optional<std::string> pipeline_split_problem(std::uint32_t layers, std::uint32_t p, std::uint32_t v,
                                                  PipelineSplit split) {
    const std::uint64_t chunks = std::uint64_t{p} * v;
    if (chunks == 0) return "pipeline stages and virtual stages must be at least 1";
    const std::uint64_t counted = std::uint64_t{layers} + split_counts_embedding(split) + split_counts_loss(split);
    if (counted % chunks != 0)
        return fmt::format(
            "{} layers{} do not divide into {} pipeline stages x {} virtual stages: choose sizes "
            "whose product divides it, or another pipeline_split",
            layers, counted == layers ? "" : fmt::format(" (+{} for the split)", counted - layers), p, v);
    if (counted / chunks < 1 + (split_counts_embedding(split) || split_counts_loss(split) ? 1u : 0u))
        return fmt::format(
            "{} layers leave a virtual stage of {} pipeline stages x {} virtual stages without a "
            "layer",
            layers, p, v);
    return std::nullopt;
}

std::vector<std::uint32_t> pipeline_layers(std::uint32_t layers, std::uint32_t p, std::uint32_t v,
                                           PipelineSplit split) {
    if (const auto problem = pipeline_split_problem(layers, p, v, split)) throw std::invalid_argument(*problem);
    std::vector<std::uint32_t> out(std::size_t{p} * v, pipeline_counted_layers(layers, p, v, split));
    if (split_counts_embedding(split)) --out.front();
    if (split_counts_loss(split)) --out.back();
    return out;
}

std::uint32_t pipeline_first_layer(const std::vector<std::uint32_t>& layers, std::uint32_t g) {
    return std::accumulate(layers.begin(), layers.begin() + g, 0u);
}

}  // namespace tune

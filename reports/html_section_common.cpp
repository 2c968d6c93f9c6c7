// Pieces several sections share: section headings and the configuration columns.
#include <fmt/format.h>

#include "reports/html_sections.h"

namespace tune {

void open_section(HtmlWriter& html, const std::string& id, std::string_view title) {
    html.open("section", {{"id", id}});
    html.element("h2", title);
}

std::vector<HtmlColumn> config_columns() {
    return {{"optimizer", false, ""},
            {"precision", false, ""},
            {"ZeRO", true, "ZeRO stage"},
            {"accum", true, "gradient accumulation steps"},
            {"micro-batch", true, ""},
            {"context", true, "tokens per sequence"},
            {"ckpt", false, "activation checkpointing"},
            {"GPUs", true, "ranks per trial"}};
}

std::vector<std::string> config_cells(const TrialConfig& c) {
    return {std::string(to_string(c.optimizer)), std::string(to_string(c.precision)), std::to_string(c.zero_stage),
            std::to_string(c.grad_accum), std::to_string(c.micro_batch), std::to_string(c.context),
            std::string(to_string(c.checkpointing)), std::to_string(c.world_size)};
}

}  // namespace tune

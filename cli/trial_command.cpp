#include "cli/trial_command.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "core/dimensions.h"
#include "core/parallel_plan.h"
#include "core/presets.h"
#include "core/units.h"

namespace tune {
namespace {

// Exact and short: "64GiB" when it divides, else bytes with their unit (parse_bytes reads both).
std::string exact_bytes(std::uint64_t bytes) {
    if (bytes % GiB == 0) return fmt::format("{}GiB", bytes / GiB);
    if (bytes % MiB == 0) return fmt::format("{}MiB", bytes / MiB);
    return fmt::format("{}B", bytes);
}

bool is_preset(const ModelSpec& m) {
    auto preset = find_model(m.name);
    return preset && *preset == m;
}

// Settings `tune trial` has no flag for must travel in --config when not at their default.
bool needs_full_config(const TrialConfig& c) {
    const TrialConfig d;
    return !is_preset(c.model) || c.neftune_alpha != d.neftune_alpha || c.adam8bit_block != d.adam8bit_block ||
           c.loss_scale_init != d.loss_scale_init || c.loss_scale_window != d.loss_scale_window;
}

void append_optional_flags(std::string& out, const TrialConfig& c) {
    const TrialConfig d;
    if (c.lr != d.lr) out += fmt::format(" --lr {}", c.lr);
    if (c.weight_decay != d.weight_decay) out += fmt::format(" --weight-decay {}", c.weight_decay);
    if (c.clip != d.clip) out += fmt::format(" --clip {}", c.clip);
    if (c.beta1) out += fmt::format(" --beta1 {}", *c.beta1);
    if (c.beta2) out += fmt::format(" --beta2 {}", *c.beta2);
    if (c.eps) out += fmt::format(" --eps {}", *c.eps);
    if (c.lora_alpha) out += fmt::format(" --lora-alpha {}", *c.lora_alpha);
    if (c.memory_limit != 0) out += fmt::format(" --memory-limit {}", exact_bytes(c.memory_limit));
}

}  // namespace

std::string shell_quote(std::string_view text) {
    const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) ||
               std::string_view("._-+/:=,@%").find(ch) != std::string_view::npos;
    });
    if (plain) return std::string(text);
    std::string out = "'";
    for (char ch : text) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return out + "'";
}

std::string trial_command(const TrialConfig& c) {
    std::string out = "tune trial";
    if (needs_full_config(c))
        out += " --config " +
               shell_quote(nlohmann::json(c).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    else
        out += " --model " + shell_quote(c.model.name);
    const TrialConfig defaults;
    for (const Dimension& d : dimensions()) {
        // As summary(): a value that means nothing here, or a later row at its default, is left out.
        if (!d.applies_to(c) || (d.applies == nullptr && d.legacy && d.get(c) == d.get(defaults))) continue;
        out += fmt::format(" {} {}", d.flag, d.text(c));
    }
    out +=
        fmt::format(" --gpus {} --steps {} --warmup {} --seed {}", parallel_plan(c).world(), c.steps, c.warmup, c.seed);
    append_optional_flags(out, c);
    return out;
}

}  // namespace tune

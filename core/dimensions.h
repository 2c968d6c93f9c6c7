// The search dimensions, one row each. Everything that names a dimension reads
// this table: the sweep file's [space] keys, the space expansion, the flags of
// every command that takes a configuration, TrialConfig's JSON, the store's
// columns, CSV/JSON export, the terminal and HTML tables, summaries.
//
// Adding a dimension (docs/architecture.md, "Where to add things"): a
// TrialConfig field, one row in dimensions.cpp, and its meaning in the
// estimator and the trainer. Nothing else names it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tune {

struct TrialConfig;
struct ModelSpec;

// A dimension's value: the index into `choices` for an enumeration, the number itself for an integer.
using DimValue = std::uint32_t;

enum class DimKind : std::uint8_t { enumeration, integer };

struct Dimension {
    std::string_view name{};    // [space] key, TrialConfig JSON key, SQL column, export column
    std::string_view flag{};    // the command-line flag, e.g. "--zero"
    std::string_view header{};  // column header in terminal and HTML tables
    std::string_view prefix{};  // before the value in summary(): "z" gives "z3"; "" for enumerations
    std::string_view help{};    // one line for --help and the docs
    DimKind kind = DimKind::integer;
    std::span<const std::string_view> choices{};  // enumeration values in order; empty for integers
    DimValue min = 0;                             // integer bounds, inclusive
    DimValue max = 0;
    int grid_rank = 0;  // position in the expansion's nesting: 0 is outermost (most expensive to change)
    // Rows added after schema 3: configurations stored before the row existed ran
    // with this value. TrialConfig's JSON leaves it out and reads an absent key as
    // it, so stored configurations keep their hashes and their meaning (trials run
    // before flash attention ran eager, though flash is now the default).
    std::optional<DimValue> legacy{};
    bool curves_over_context = false;  // the report draws one throughput curve per value against context
    DimValue (*fallback)(const ModelSpec&) = nullptr;  // the value an omitted [space] key takes
    DimValue (*get)(const TrialConfig&) = nullptr;
    void (*set)(TrialConfig&, DimValue) = nullptr;
    // Whether the value means anything in `c` (a LoRA rank does not with method full).
    // Where it does not, the expansion holds it at TrialConfig's default and
    // enumerates it once (collapsed); summaries leave it out. Null: always.
    bool (*applies)(const TrialConfig&) = nullptr;

    bool is_enum() const { return kind == DimKind::enumeration; }
    // "bf16-mixed", "4096".
    std::string format(DimValue v) const;
    std::string text(const TrialConfig& c) const { return format(get(c)); }
    // nullopt when `text` names no choice or is no integer within [min, max].
    std::optional<DimValue> parse(std::string_view text) const;
    // "adamw, lion, adam8bit, adafactor or lomo", or "0 to 3".
    std::string allowed() const;
    bool applies_to(const TrialConfig& c) const { return applies == nullptr || applies(c); }
};

inline constexpr std::size_t kDimensionCount = 18;

// In display order (tables, summaries, exports).
const std::array<Dimension, kDimensionCount>& dimensions();
// Indices into dimensions(), outermost first, for the space expansion.
const std::array<std::size_t, kDimensionCount>& grid_order();
const Dimension* find_dimension(std::string_view name);

// The dimensions' values of `c` in display order, formatted ("adamw", "bf16-mixed", "3", ...).
std::array<std::string, kDimensionCount> dimension_cells(const TrialConfig& c);

}  // namespace tune

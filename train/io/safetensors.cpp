#include "train/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/config_error.h"
#include "core/input_file.h"
#include "core/output_file.h"
#include "kernels/math/half.h"

namespace tune::train {

namespace {

// Every problem with the file is bad input to `tune trial --init` (exit 2), not a failed trial.
ConfigError bad(const std::filesystem::path& path, const std::string& what) {
    return ConfigError(path.string() + ": " + what);
}

// Weights for a CPU or single-GPU trial; the tensors are read whole into memory.
constexpr std::uint64_t kMaxSafetensorsBytes = 16ull << 30;
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the format's own limit

std::uint64_t element_bytes(const std::string& dtype) {
    if (dtype == "F32") return 4;
    if (dtype == "BF16" || dtype == "F16") return 2;
    return 0;
}

SafetensorsEntry parse_entry(const std::filesystem::path& path, const std::string& name, const nlohmann::json& j,
                             std::uint64_t data_bytes) {
    SafetensorsEntry e;
    try {
        e.dtype = j.at("dtype").get<std::string>();
        e.shape = j.at("shape").get<std::vector<std::int64_t>>();
        const auto offsets = j.at("data_offsets").get<std::vector<std::uint64_t>>();
        if (offsets.size() != 2) throw bad(path, fmt::format("tensor {}: data_offsets needs two values", name));
        e.begin = offsets[0], e.end = offsets[1];
    } catch (const nlohmann::json::exception& ex) {
        throw bad(path, fmt::format("tensor {}: malformed header entry ({})", name, ex.what()));
    }
    // Elements are at least a byte each, so a shape that needs more than the data holds (or a
    // negative dimension, or a product past 2^64) cannot be right.
    std::uint64_t elements = 1;
    for (const std::int64_t d : e.shape) {
        if (d < 0 || (d > 0 && elements > data_bytes / static_cast<std::uint64_t>(d)))
            throw bad(path, fmt::format("tensor {}: shape has a negative dimension or more elements than the file "
                                        "has bytes",
                                        name));
        elements *= static_cast<std::uint64_t>(d);
    }
    if (e.begin > e.end || e.end > data_bytes)
        throw bad(path, fmt::format("tensor {}: data_offsets [{}, {}) outside the {} data bytes", name, e.begin, e.end,
                                    data_bytes));
    return e;
}

// Two tensors sharing bytes would alias each other's weights: the format forbids it, so a
// file that does it is damaged or crafted. Sorted by start, each must end before the next.
void refuse_overlaps(const std::filesystem::path& path, const std::map<std::string, SafetensorsEntry>& entries) {
    std::vector<std::pair<const std::string*, const SafetensorsEntry*>> sorted;
    for (const auto& [name, e] : entries)
        if (e.end > e.begin) sorted.emplace_back(&name, &e);
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
    for (std::size_t i = 1; i < sorted.size(); ++i)
        if (sorted[i].second->begin < sorted[i - 1].second->end)
            throw bad(path, fmt::format("tensors {} [{}, {}) and {} [{}, {}) overlap", *sorted[i - 1].first,
                                        sorted[i - 1].second->begin, sorted[i - 1].second->end, *sorted[i].first,
                                        sorted[i].second->begin, sorted[i].second->end));
}

}  // namespace

// The header is read and judged first; then only the bytes its tensors name, once, into the
// data buffer: a crafted header on a large (or sparse) file costs nothing but the header.
SafetensorsFile SafetensorsFile::load(const std::filesystem::path& path) {
    const InputFile file(path, kMaxSafetensorsBytes, "safetensors file");
    if (file.size() < 8) throw bad(path, "too short for a safetensors header");
    unsigned char length[8];
    file.read_at(0, length, 8);
    std::uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = header << 8 | length[i];
    if (header > file.size() - 8) throw bad(path, fmt::format("header length {} exceeds the file", header));
    if (header > kMaxHeaderBytes) throw bad(path, fmt::format("header length {} exceeds the format's 100 MB", header));
    std::string text(static_cast<std::size_t>(header), '\0');
    file.read_at(8, text.data(), header);
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) throw bad(path, "header is not JSON");
    if (!j.is_object()) throw bad(path, "header is not a JSON object");
    SafetensorsFile f;
    f.path_ = path;
    const std::uint64_t data_bytes = file.size() - 8 - header;
    std::uint64_t used = 0;
    for (const auto& [name, entry] : j.items())
        if (name != "__metadata__") {
            f.entries_[name] = parse_entry(path, name, entry, data_bytes);
            used = std::max(used, f.entries_[name].end);
        }
    refuse_overlaps(path, f.entries_);
    f.data_.resize(static_cast<std::size_t>(used));
    file.read_at(8 + header, f.data_.data(), used);
    return f;
}

std::vector<float> SafetensorsFile::read_f32(const std::string& name) const {
    const auto it = entries_.find(name);
    if (it == entries_.end()) throw bad(path_, fmt::format("no tensor {}", name));
    const SafetensorsEntry& e = it->second;
    const std::uint64_t width = element_bytes(e.dtype);
    if (width == 0) throw bad(path_, fmt::format("tensor {} has dtype {}; supported: F32, BF16, F16", name, e.dtype));
    std::uint64_t count = 1;
    for (std::int64_t s : e.shape) count *= static_cast<std::uint64_t>(s);
    if (count * width != e.end - e.begin)
        throw bad(path_,
                  fmt::format("tensor {}: {} bytes for {} elements of {}", name, e.end - e.begin, count, e.dtype));
    std::vector<float> out(count);
    const unsigned char* p = data_.data() + e.begin;
    for (std::uint64_t i = 0; i < count; ++i) {
        if (width == 4) {
            std::memcpy(&out[i], p + 4 * i, 4);
        } else {
            const auto bits = static_cast<std::uint16_t>(p[2 * i] | p[2 * i + 1] << 8);
            out[i] = e.dtype == "BF16" ? math::to_float(math::bf16{bits}) : math::to_float(math::fp16{bits});
        }
    }
    return out;
}

std::string safetensors_bytes(const std::vector<NamedTensor>& tensors) {
    nlohmann::json header = nlohmann::json::object();
    std::uint64_t offset = 0;
    for (const NamedTensor& t : tensors) {
        const std::uint64_t bytes = t.values.size() * 4;
        header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text = header.dump();
    while ((text.size() + 8) % 8 != 0) text += ' ';
    std::string out;
    out.reserve(8 + text.size() + offset);
    const std::uint64_t length = text.size();
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
    out += text;
    for (const NamedTensor& t : tensors)
        out.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * 4);
    return out;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors) {
    write_output_file(path, safetensors_bytes(tensors), "the safetensors file");
}

}  // namespace tune::train

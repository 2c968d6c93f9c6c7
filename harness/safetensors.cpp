#include "harness/safetensors.h"

#include <cstring>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/math/half.h"

namespace tune::harness {

namespace {

std::runtime_error bad(const std::filesystem::path& path, const std::string& what) {
    return std::runtime_error(fmt::format("{}: {}", path.string(), what));
}

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
    if (e.begin > e.end || e.end > data_bytes)
        throw bad(path, fmt::format("tensor {}: data_offsets [{}, {}) outside the {} data bytes", name, e.begin,
                                    e.end, data_bytes));
    return e;
}

}  // namespace

SafetensorsFile SafetensorsFile::load(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw bad(path, "cannot open");
    std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.size() < 8) throw bad(path, "too short for a safetensors header");
    std::uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = header << 8 | bytes[static_cast<std::size_t>(i)];
    if (header > bytes.size() - 8) throw bad(path, fmt::format("header length {} exceeds the file", header));
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header));
    } catch (const nlohmann::json::exception& ex) {
        throw bad(path, fmt::format("header is not JSON ({})", ex.what()));
    }
    if (!j.is_object()) throw bad(path, "header is not a JSON object");
    SafetensorsFile f;
    f.path_ = path;
    f.data_.assign(bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header), bytes.end());
    for (const auto& [name, entry] : j.items())
        if (name != "__metadata__") f.entries_[name] = parse_entry(path, name, entry, f.data_.size());
    return f;
}

std::vector<float> SafetensorsFile::read_f32(const std::string& name) const {
    const auto it = entries_.find(name);
    if (it == entries_.end()) throw bad(path_, fmt::format("no tensor {}", name));
    const SafetensorsEntry& e = it->second;
    const std::uint64_t width = element_bytes(e.dtype);
    if (width == 0)
        throw bad(path_, fmt::format("tensor {} has dtype {}; supported: F32, BF16, F16", name, e.dtype));
    std::uint64_t count = 1;
    for (std::int64_t s : e.shape) count *= static_cast<std::uint64_t>(s);
    if (count * width != e.end - e.begin)
        throw bad(path_, fmt::format("tensor {}: {} bytes for {} elements of {}", name, e.end - e.begin, count, e.dtype));
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

void write_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors) {
    nlohmann::json header = nlohmann::json::object();
    std::uint64_t offset = 0;
    for (const NamedTensor& t : tensors) {
        const std::uint64_t bytes = t.values.size() * 4;
        header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text = header.dump();
    while ((text.size() + 8) % 8 != 0) text += ' ';
    std::ofstream out(path, std::ios::binary);
    if (!out) throw bad(path, "cannot create");
    const std::uint64_t length = text.size();
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((length >> (8 * i)) & 0xff));
    out << text;
    for (const NamedTensor& t : tensors)
        out.write(reinterpret_cast<const char*>(t.values.data()), static_cast<std::streamsize>(t.values.size() * 4));
    if (!out) throw bad(path, "write failed");
}

}  // namespace tune::harness

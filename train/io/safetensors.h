// The safetensors format (Hugging Face): an 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets}}, then the raw
// little-endian tensor bytes. Reading supports F32, BF16 and F16 tensors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace tune::train {

struct SafetensorsEntry {
    std::string dtype;  // "F32", "BF16", "F16", ...
    std::vector<std::int64_t> shape;
    std::uint64_t begin = 0, end = 0;  // byte range in the data section
};

class SafetensorsFile {
public:
    // Reads and judges the header, then only the bytes its tensors name; a malformed file is a
    // ConfigError naming the path.
    static SafetensorsFile load(const std::filesystem::path& path);

    const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
    // The tensor's values widened to fp32; unsupported dtypes are an error naming the tensor.
    std::vector<float> read_f32(const std::string& name) const;

private:
    std::filesystem::path path_;
    std::map<std::string, SafetensorsEntry> entries_;
    std::vector<unsigned char> data_;
};

struct NamedTensor {
    std::string name;
    std::vector<std::int64_t> shape;
    std::vector<float> values;  // written as F32
};

// The file's bytes: the little-endian header length, the JSON header, the F32 data.
std::string safetensors_bytes(const std::vector<NamedTensor>& tensors);
// Written atomically (core/output_file.h); OutputFileError names the path on failure.
void write_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors);

}  // namespace tune::train

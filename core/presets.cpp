#include "core/presets.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <thread>

#include "core/units.h"

namespace tune {
namespace {

ModelSpec llama(std::string name, std::uint64_t vocab, std::uint64_t hidden, std::uint64_t layers, std::uint64_t heads,
                std::uint64_t kv_heads, std::uint64_t ffn, std::uint64_t max_context, double rms_eps,
                double rope_theta) {
    return ModelSpec{std::move(name), vocab, hidden, layers, heads, kv_heads, ffn, max_context, rms_eps, rope_theta};
}

// Llama 3.1-3.3's RoPE: theta 5e5, llama3 scaling from an 8192-token original context.
ModelSpec llama31(std::string name, std::uint64_t hidden, std::uint64_t layers, std::uint64_t heads, std::uint64_t ffn,
                  double factor, bool tied) {
    ModelSpec m = llama(std::move(name), 128256, hidden, layers, heads, 8, ffn, 131072, 1e-5, 500000.0);
    m.rope_scaling = RopeScaling{"llama3", factor, 1.0, 4.0, 8192};
    m.tied_embeddings = tied;
    return m;
}

ModelSpec qwen(std::string name, std::uint64_t vocab, std::uint64_t hidden, std::uint64_t layers, std::uint64_t heads,
               std::uint64_t kv_heads, std::uint64_t ffn, std::uint64_t max_context, bool qwen3) {
    ModelSpec m = llama(std::move(name), vocab, hidden, layers, heads, kv_heads, ffn, max_context, 1e-6, 1e6);
    m.qkv_bias = !qwen3;  // Qwen2 and 2.5 bias q, k, v; Qwen3 normalizes q and k instead
    m.qk_norm = qwen3;
    return m;
}

// tiny with every Llama-family variant the trainer runs: head_dim apart from
// hidden/heads, biases on every linear, q/k norms, tied embeddings, llama3 RoPE.
ModelSpec tiny_variants() {
    ModelSpec m = llama("tiny-variants", 256, 64, 2, 4, 2, 176, 256, 1e-5, 10000.0);
    m.head_dim_setting = 24;
    m.qkv_bias = m.o_bias = m.mlp_bias = true;
    m.qk_norm = true;
    m.tied_embeddings = true;
    m.rope_scaling = RopeScaling{"llama3", 8.0, 1.0, 4.0, 64};
    return m;
}

const std::array<ModelPreset, 11>& models() {
    static const std::array<ModelPreset, 11> table{{
        {llama("llama-7b", 32000, 4096, 32, 32, 32, 11008, 4096, 1e-5, 10000.0),
         "Llama 2 7B config.json (Touvron et al. 2023): 6,738,415,616 parameters"},
        {llama("llama-13b", 32000, 5120, 40, 40, 40, 13824, 4096, 1e-5, 10000.0),
         "Llama 2 13B config.json: 13,015,864,320 parameters"},
        {llama("llama-70b", 32000, 8192, 80, 64, 8, 28672, 4096, 1e-5, 10000.0),
         "Llama 2 70B config.json, grouped-query attention with 8 KV heads: 68,976,648,192 parameters"},
        {llama("llama3-8b", 128256, 4096, 32, 32, 8, 14336, 8192, 1e-5, 500000.0),
         "Meta Llama 3 8B config.json: 8,030,261,248 parameters"},
        {llama31("llama3.1-8b", 4096, 32, 32, 14336, 8.0, false),
         "Llama 3.1 8B config.json (rope_scaling llama3, factor 8): 8,030,261,248 parameters"},
        {llama31("llama3.2-1b", 2048, 16, 32, 8192, 32.0, true),
         "Llama 3.2 1B config.json (llama3 factor 32, tied embeddings): 1,235,814,400 parameters"},
        {qwen("qwen2.5-7b", 152064, 3584, 28, 28, 4, 18944, 131072, false),
         "Qwen2.5 7B config.json (q, k, v biases): 7,615,616,512 parameters"},
        {qwen("qwen3-8b", 151936, 4096, 36, 32, 8, 12288, 40960, true),
         "Qwen3 8B config.json (q/k norms): 8,190,735,360 parameters"},
        {llama("tiny", 256, 64, 2, 4, 2, 176, 256, 1e-5, 10000.0),
         "tune's test model: runs a CPU step in milliseconds"},
        {tiny_variants(), "tune's test model with biases, q/k norms, tied embeddings, head_dim 24 and llama3 RoPE"},
        {llama("small", 2048, 256, 4, 8, 4, 688, 1024, 1e-5, 10000.0),
         "tune's demo model: about 4M parameters, a CPU step in well under a second"},
    }};
    return table;
}

// memory_bytes is the total nvidia-smi reports, not the marketing number.
// Link bandwidths are per GPU and per direction.
Hardware gpu(std::string name, std::uint64_t memory_mib, double half_tflops, double fp32_tflops, double hbm_tbps,
             double link_gbps, std::uint32_t gpus_per_node) {
    Hardware h;
    h.device = std::move(name);
    h.backend = BackendKind::cuda;
    h.memory_bytes = memory_mib * MiB;
    h.peak_flops_half = half_tflops * 1e12;
    h.peak_flops_fp32 = fp32_tflops * 1e12;
    h.hbm_bytes_per_s = hbm_tbps * 1e12;
    h.intra_node_bytes_per_s = link_gbps * 1e9;
    h.inter_node_bytes_per_s = 50e9;  // one 400 Gb/s NIC per GPU
    // CUDA context, cuBLAS(Lt) workspace and NCCL buffers before the first tensor;
    // a starting point the sweep driver recalibrates from measurements.
    h.runtime_overhead_bytes = 1 * GiB;
    // PCIe 4.0 x16's 32 GB/s at the 80% pinned copies reach; a server's host memory as the CPU optimizer
    // streams it (DeepSpeed's CPU Adam is bandwidth-bound; a two-socket DDR4 server's STREAM triad).
    h.host_link_bytes_per_s = 25e9;
    h.host_memory_bytes_per_s = 200e9;
    h.gpus_per_node = gpus_per_node;
    h.nodes = 1;
    return h;
}

Hardware cpu_device() {
    Hardware h;
    h.device = "cpu";
    h.backend = BackendKind::cpu;
    h.memory_bytes = 16 * GiB;
    // Nominal x86-64 peak: per core two 8-wide fp32 FMA units at 3 GHz (96 GFLOP/s),
    // times this machine's cores. 16-bit storage is computed in fp32, so the same.
    const double cores = std::max(1u, std::thread::hardware_concurrency());
    h.peak_flops_fp32 = cores * 96e9;
    h.peak_flops_half = h.peak_flops_fp32;
    h.hbm_bytes_per_s = 20e9;
    h.intra_node_bytes_per_s = 5e9;  // MPI over shared memory
    h.inter_node_bytes_per_s = 1e9;
    h.runtime_overhead_bytes = 0;
    h.gpus_per_node = 64;
    h.nodes = 1;
    return h;
}

// A PCIe 5.0 x16 host link (H100, H200): 64 GB/s at 80%, beside DDR5 servers' bandwidth.
Hardware pcie5(Hardware h) {
    h.host_link_bytes_per_s = 50e9;
    h.host_memory_bytes_per_s = 300e9;
    return h;
}

// A desktop's host: two DDR5 channels' bandwidth.
Hardware workstation(Hardware h) {
    h.host_memory_bytes_per_s = 60e9;
    return h;
}

// A preset with the fraction of its 16-bit peak a training step reaches, as published.
Hardware trained_at(Hardware h, double efficiency) {
    h.training_efficiency = efficiency;
    return h;
}

// MosaicML's MPT training benchmarks (mosaicml/llm-foundry@061f2c7
// scripts/train/benchmarking/README.md): MPT-7B, 8 GPUs, sequence 2048, FSDP
// full shard, flash attention. Their HFU counts every executed FLOP, as
// our step time does (MFU where nothing is recomputed). None of these runs is
// in the published-runs benchmark (tests/fixtures/published).
#define TUNE_MPT7B \
    "llm-foundry MPT-7B on 8 GPUs, seq 2048 (mosaicml/llm-foundry@061f2c7 scripts/train/benchmarking/README.md)"

const std::array<DevicePreset, 8>& devices() {
    static const std::array<DevicePreset, 8> table{{
        {trained_at(pcie5(gpu("h100-80gb", 81559, 989, 67, 3.35, 450, 8)), 0.4644),
         "H100 SXM5 data sheet: 989 TFLOP/s bf16 dense, 67 fp32, 3.35 TB/s; NVLink 4 900 GB/s bidirectional; "
         "training at 46.4% of the bf16 peak: " TUNE_MPT7B ", no checkpointing, MFU 46.44%",
         "h100"},
        {trained_at(pcie5(gpu("h200", 143771, 989, 67, 4.8, 450, 8)), 0.4644),
         "H200 SXM data sheet: 141 GB HBM3e at 4.8 TB/s; same compute as H100, and the H100's training efficiency "
         "(no published H200 run)",
         "h200"},
        {trained_at(gpu("a100-80gb", 81920, 312, 19.5, 2.04, 300, 8), 0.6423),
         "A100 SXM4 80GB data sheet: 312 TFLOP/s bf16 dense, 19.5 fp32, 2.04 TB/s; NVLink 3 600 GB/s; training at "
         "64.2% of the bf16 peak: " TUNE_MPT7B ", no checkpointing, MFU 64.23%",
         "a100-sxm4-80gb"},
        {trained_at(gpu("a100-40gb", 40960, 312, 19.5, 1.56, 300, 8), 0.6789),
         "A100 40GB data sheet: 1.56 TB/s; training at 67.9% of the bf16 peak: " TUNE_MPT7B
         ", pure bf16, full checkpointing, HFU 67.89%",
         "a100-sxm4-40gb"},
        {gpu("l40s", 46068, 362, 91.6, 0.864, 32, 8),
         "L40S data sheet: 362 TFLOP/s bf16 dense, 91.6 fp32, 864 GB/s; PCIe Gen4 x16", "l40s"},
        {workstation(gpu("rtx4090", 24564, 165, 82.6, 1.0, 32, 1)),
         "RTX 4090: 165 TFLOP/s bf16 dense (fp32 accumulate), 82.6 fp32, 1.0 TB/s; PCIe Gen4, no NVLink", "4090"},
        {gpu("a10g", 23028, 125, 31.2, 0.6, 32, 8),
         "A10 data sheet (the A10G of AWS g5 is its variant): 125 TFLOP/s bf16 dense, 31.2 fp32, 600 GB/s; PCIe Gen4",
         "a10g"},
        {cpu_device(), "tune's CPU backend: 96 GFLOP/s per core (AVX2 FMA at 3 GHz) times this machine's cores", "cpu"},
    }};
    return table;
}
#undef TUNE_MPT7B

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
    return out;
}

template <typename Table>
std::string names_of(const Table& table, auto name_of) {
    std::string out;
    for (const auto& row : table) out += (out.empty() ? "" : ", ") + name_of(row);
    return out;
}

}  // namespace

std::span<const ModelPreset> model_presets() { return models(); }
std::span<const DevicePreset> device_presets() { return devices(); }

std::optional<ModelSpec> find_model(std::string_view name) {
    for (const auto& p : models())
        if (p.spec.name == name) return p.spec;
    return std::nullopt;
}

std::optional<Hardware> find_device(std::string_view name) {
    for (const auto& p : devices())
        if (p.hardware.device == name) return p.hardware;
    return std::nullopt;
}

std::optional<Hardware> match_device(std::string_view cuda_name, std::uint64_t total_memory) {
    const std::string name = lower(cuda_name);
    for (const auto& p : devices()) {
        if (p.hardware.backend != BackendKind::cuda) continue;
        // "A100-SXM4-80GB" and "A100 80GB PCIe" both exist; fall back to matching family + memory.
        if (name.find(p.match) != std::string::npos) return p.hardware;
    }
    for (const auto& p : devices()) {
        if (p.hardware.backend != BackendKind::cuda) continue;
        const std::string family = std::string(p.hardware.device.substr(0, 4));
        const bool close_memory =
            total_memory > p.hardware.memory_bytes * 9 / 10 && total_memory < p.hardware.memory_bytes * 11 / 10;
        if (name.find(family) != std::string::npos && close_memory) return p.hardware;
    }
    return std::nullopt;
}

std::string model_names() {
    return names_of(models(), [](const ModelPreset& p) { return p.spec.name; });
}
std::string device_names() {
    return names_of(devices(), [](const DevicePreset& p) { return p.hardware.device; });
}

}  // namespace tune

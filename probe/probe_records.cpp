#include "probe/probe_records.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "kernels/speed_reference.h"

namespace tune::probe {
namespace {

using nlohmann::json;

// What a key's "probe" field says the record measured.
constexpr const char* kGemm = "gemm";
constexpr const char* kAttention = "attention";
constexpr const char* kElementwise = "elementwise";
constexpr const char* kOptimizer = "optimizer";
constexpr const char* kDequantize = "nf4-dequantize";
constexpr const char* kBucket = "bucket";
constexpr const char* kHostLink = "host-link";
constexpr const char* kCollective = "collective";
constexpr const char* kSpeedReference = "speed-reference";
constexpr const char* kDeviceBaseline = "device-baseline";

// The words of the keys' enum fields. A backward GEMM's name ends in its pass's word too; a forward
// one's has none, as its name read before there were passes.
constexpr std::array<std::pair<GemmPass, const char*>, 3> kGemmPasses{
    {{GemmPass::forward, "forward"}, {GemmPass::input_grad, "dx"}, {GemmPass::weight_grad, "dw"}}};
constexpr std::array<std::pair<bool, const char*>, 2> kAttentionImpls{{{true, "fused"}, {false, "eager"}}};
constexpr std::array<std::pair<Collective, const char*>, 3> kCollectiveOps{
    {{Collective::all_reduce, "all-reduce"},
     {Collective::reduce_scatter, "reduce-scatter"},
     {Collective::all_gather, "all-gather"}}};
// Attention's and the element-wise ops' rates hold several times: one record each, the key saying which.
constexpr std::array<std::pair<double AttentionRate::*, const char*>, 2> kAttentionPasses{
    {{&AttentionRate::forward_s, "forward"}, {&AttentionRate::backward_s, "backward"}}};
constexpr std::array<std::pair<double ElementwiseRate::*, const char*>, 3> kElementwiseParts{
    {{&ElementwiseRate::layer_forward_s, "layer-forward"},
     {&ElementwiseRate::layer_backward_s, "layer-backward"},
     {&ElementwiseRate::outer_s, "outer"}}};

// A key of the right JSON types that is still no probe's: a dtype, enum word or size no probe has. The
// readers throw it where nlohmann throws for a missing or mistyped field, so one catch skips the record.
struct NotAProbe : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

template <typename T, std::size_t N>
const char* word_of(T value, const std::array<std::pair<T, const char*>, N>& words) {
    for (const auto& [v, word] : words)
        if (v == value) return word;
    return "?";
}

// ---- keys ------------------------------------------------------------------

json probe_key(const GemmRate& g) {
    return {{"probe", kGemm},
            {"dtype", probe_dtype_name(g.dtype)},
            {"m", g.m},
            {"n", g.n},
            {"k", g.k},
            {"pass", word_of(g.pass, kGemmPasses)},
            {"accumulate", g.output.accumulate},
            {"fp32_output", g.output.fp32}};
}

// The shape alone; each record adds which of the rate's times it holds.
json probe_key(const AttentionRate& a) {
    return {{"probe", kAttention},
            {"impl", word_of(a.fused, kAttentionImpls)},
            {"dtype", probe_dtype_name(a.dtype)},
            {"batch", a.batch},
            {"seq", a.seq},
            {"heads", a.heads},
            {"kv_heads", a.kv_heads},
            {"head_dim", a.head_dim}};
}

// Likewise the shape alone.
json probe_key(const ElementwiseRate& e) {
    return {{"probe", kElementwise},  {"dtype", probe_dtype_name(e.dtype)},
            {"tokens", e.tokens},     {"hidden", e.hidden},
            {"kv_dim", e.kv_dim},     {"ffn", e.ffn},
            {"vocab", e.vocab},       {"heads", e.heads},
            {"kv_heads", e.kv_heads}, {"head_dim", e.head_dim}};
}

// A probe whose work ran on the host's side (offload) says so in its key,
// "where": "host"; the device's keys carry nothing, so cached probes still match.
void put_where(json& key, bool host) {
    if (host) key["where"] = "host";
}
bool host_at(const json& key) { return key.value("where", std::string()) == "host"; }

json probe_key(const DequantizeRate& d) {
    return {{"probe", kDequantize},
            {"dtype", probe_dtype_name(d.dtype)},
            {"hidden", d.hidden},
            {"kv_dim", d.kv_dim},
            {"ffn", d.ffn}};
}

json probe_key(const HostLinkRate& l) { return {{"probe", kHostLink}, {"bytes", l.bytes}}; }

json probe_key(const BucketRate& b) {
    json key{{"probe", kBucket}, {"dtype", probe_dtype_name(b.dtype)}, {"ranks", b.ranks}, {"bytes", b.bytes}};
    put_where(key, b.host);
    return key;
}

// The reference's size and count: another reference measures another pace.
json speed_reference_key() {
    return {{"probe", kSpeedReference},
            {"size", kernels::SpeedReference::kSize},
            {"calls", kernels::SpeedReference::kCalls}};
}

json device_baseline_key() { return {{"probe", kDeviceBaseline}}; }

// ---- names, for people: the words `tune probe` printed before there were keys

std::string name_of(const GemmRate& g) {
    std::string name = fmt::format("gemm {} m={} n={} k={}", probe_dtype_name(g.dtype), g.m, g.n, g.k);
    if (g.pass != GemmPass::forward) name += fmt::format(" {}", word_of(g.pass, kGemmPasses));
    if (g.output.accumulate) name += " acc";
    if (g.output.fp32) name += " f32out";
    return name;
}

std::string name_of(const AttentionRate& a) {
    return fmt::format("attention {} {} b={} s={} h={} kvh={} d={}", word_of(a.fused, kAttentionImpls),
                       probe_dtype_name(a.dtype), a.batch, a.seq, a.heads, a.kv_heads, a.head_dim);
}

std::string name_of(const ElementwiseRate& e) {
    return fmt::format("elementwise {} t={} h={} kv={} f={} v={} heads={} kvh={} d={}", probe_dtype_name(e.dtype),
                       e.tokens, e.hidden, e.kv_dim, e.ffn, e.vocab, e.heads, e.kv_heads, e.head_dim);
}

std::string name_of(const DequantizeRate& d) {
    return fmt::format("nf4-dequantize {} h={} kv={} f={}", probe_dtype_name(d.dtype), d.hidden, d.kv_dim, d.ffn);
}

std::string name_of(const HostLinkRate& l) { return fmt::format("host link bytes={}, pinned host to device", l.bytes); }

std::string name_of(const BucketRate& b) {
    return fmt::format("bucket {} n={} bytes={}{}", probe_dtype_name(b.dtype), b.ranks, b.bytes,
                       b.host ? " shard on the host" : "");
}

std::string speed_reference_name() {
    return fmt::format("speed-reference gemm f32 n={} x{}", kernels::SpeedReference::kSize,
                       kernels::SpeedReference::kCalls);
}

ProbeRecord record(std::string name, const json& key, double value, const char* unit) {
    return {std::move(name), key.dump(), value, unit, 0};
}

// One of a rate's times: the shape's name and key, with the time's word (under `field` in the key).
ProbeRecord time_record(const std::string& name, json key, const char* field, const char* word, double seconds) {
    key[field] = word;
    return record(fmt::format("{} {}", name, word), key, seconds, "s");
}

// ---- reading keys: each reader throws (json::exception or NotAProbe) before it changes anything

// A size: a positive integer that fits Int. A negative one is read as signed first: as unsigned it would wrap.
template <typename Int>
Int positive(const json& value, const char* what) {
    if (!value.is_number_integer() || (!value.is_number_unsigned() && value.get<std::int64_t>() < 0))
        throw NotAProbe(fmt::format("{}: not a positive integer", what));
    const auto n = value.get<std::uint64_t>();
    if (n < 1 || n > static_cast<std::uint64_t>(std::numeric_limits<Int>::max()))
        throw NotAProbe(fmt::format("{}: {} is out of range", what, n));
    return static_cast<Int>(n);
}

template <typename Int = std::int64_t>
Int size_at(const json& key, const char* field) {
    return positive<Int>(key.at(field), field);
}

ProbeDtype dtype_at(const json& key) {
    const std::string name = key.at("dtype").get<std::string>();
    if (const auto d = parse_probe_dtype(name)) return *d;
    throw NotAProbe("dtype: " + name);
}

template <typename T, std::size_t N>
T word_at(const json& key, const char* field, const std::array<std::pair<T, const char*>, N>& words) {
    const std::string word = key.at(field).get<std::string>();
    for (const auto& [v, w] : words)
        if (word == w) return v;
    throw NotAProbe(fmt::format("{}: {}", field, word));
}

// One of core's enums (optimizer, precision), by the word files and flags use.
template <typename Enum, std::size_t N>
Enum enum_at(const json& key, const char* field, const std::array<Enum, N>& all) {
    const std::string word = key.at(field).get<std::string>();
    if (const auto e = parse_enum(word, all)) return *e;
    throw NotAProbe(fmt::format("{}: {}", field, word));
}

void expect_kind(const json& key, const char* kind) {
    const std::string probe = key.at("probe").get<std::string>();
    if (probe != kind) throw NotAProbe(fmt::format("a {} probe, not a {} one", probe, kind));
}

// [[rows, cols], ...], at least one.
std::vector<TensorShape> tensors_at(const json& key) {
    const json& list = key.at("tensors");
    if (!list.is_array() || list.empty()) throw NotAProbe("tensors: not a list of shapes");
    std::vector<TensorShape> out;
    for (const json& t : list) {
        if (!t.is_array() || t.size() != 2) throw NotAProbe("tensors: a shape is not [rows, cols]");
        out.push_back({positive<std::int64_t>(t[0], "rows"), positive<std::int64_t>(t[1], "cols")});
    }
    return out;
}

GemmRate gemm_of(const json& key) {
    GemmRate g;
    g.dtype = dtype_at(key);
    g.m = size_at(key, "m"), g.n = size_at(key, "n"), g.k = size_at(key, "k");
    g.pass = word_at(key, "pass", kGemmPasses);
    g.output.accumulate = key.at("accumulate").get<bool>();
    g.output.fp32 = key.at("fp32_output").get<bool>();
    return g;
}

AttentionRate attention_of(const json& key) {
    AttentionRate a;
    a.fused = word_at(key, "impl", kAttentionImpls);
    a.dtype = dtype_at(key);
    a.batch = size_at(key, "batch"), a.seq = size_at(key, "seq");
    a.heads = size_at(key, "heads"), a.kv_heads = size_at(key, "kv_heads"), a.head_dim = size_at(key, "head_dim");
    return a;
}

ElementwiseRate elementwise_of(const json& key) {
    ElementwiseRate e;
    e.dtype = dtype_at(key);
    e.tokens = size_at(key, "tokens");
    e.hidden = size_at(key, "hidden"), e.kv_dim = size_at(key, "kv_dim"), e.ffn = size_at(key, "ffn");
    e.vocab = size_at(key, "vocab");
    e.heads = size_at(key, "heads"), e.kv_heads = size_at(key, "kv_heads"), e.head_dim = size_at(key, "head_dim");
    return e;
}

OptimizerRate optimizer_of(const json& key) {
    expect_kind(key, kOptimizer);
    OptimizerRate r;
    r.optimizer = enum_at(key, "optimizer", kOptimizers);
    r.precision = enum_at(key, "precision", kPrecisions);
    r.block = size_at(key, "block");
    r.tensors = tensors_at(key);
    r.host = host_at(key);
    return r;
}

CollectiveRate collective_of(const json& key) {
    expect_kind(key, kCollective);
    CollectiveRate c;
    c.op = word_at(key, "op", kCollectiveOps);
    c.ranks = size_at<std::uint32_t>(key, "ranks");
    c.bytes = size_at<std::uint64_t>(key, "bytes");
    c.dtype = dtype_at(key);
    return c;
}

// The records of one shape fill one rate, each setting its own time.
template <typename Rate>
void merge(std::vector<Rate>& rates, const Rate& shape, double Rate::*time, double value) {
    const json key = probe_key(shape);
    auto it = std::find_if(rates.begin(), rates.end(), [&](const Rate& r) { return probe_key(r) == key; });
    if (it == rates.end()) it = rates.insert(it, shape);
    (*it).*time = value;
}

void read_gemm(const json& key, double value, ProbedRates& out) {
    GemmRate g = gemm_of(key);
    g.flops_per_s = value;
    out.gemm.push_back(g);
}

void read_attention(const json& key, double value, ProbedRates& out) {
    const AttentionRate shape = attention_of(key);
    merge(out.attention, shape, word_at(key, "pass", kAttentionPasses), value);
}

void read_elementwise(const json& key, double value, ProbedRates& out) {
    const ElementwiseRate shape = elementwise_of(key);
    merge(out.elementwise, shape, word_at(key, "part", kElementwiseParts), value);
}

void read_optimizer(const json& key, double value, ProbedRates& out) {
    OptimizerRate r = optimizer_of(key);
    r.seconds = value;
    out.optimizers.push_back(std::move(r));
}

void read_dequantize(const json& key, double value, ProbedRates& out) {
    const DequantizeRate d{dtype_at(key), size_at(key, "hidden"), size_at(key, "kv_dim"), size_at(key, "ffn"), value};
    out.dequantize.push_back(d);
}

void read_bucket(const json& key, double value, ProbedRates& out) {
    BucketRate b{dtype_at(key), size_at<std::uint32_t>(key, "ranks"), size_at<std::uint64_t>(key, "bytes"), value};
    b.host = host_at(key);
    out.buckets.push_back(b);
}

void read_host_link(const json& key, double value, ProbedRates& out) {
    out.host_links.push_back({size_at<std::uint64_t>(key, "bytes"), value});
}

void read_collective(const json& key, double value, ProbedRates& out) {
    CollectiveRate c = collective_of(key);
    c.bus_bytes_per_s = value;
    out.collectives.push_back(c);
}

// Only this build's reference: a rate taken beside another one's time would be scaled wrongly.
void read_speed_reference(const json& key, double value, ProbedRates& out) {
    if (key != speed_reference_key()) throw NotAProbe("speed-reference: another reference's");
    out.speed_reference_s = value;
}

void read_device_baseline(const json&, double value, ProbedRates& out) {
    out.device_baseline_bytes = static_cast<std::uint64_t>(value);
}

using Reader = void (*)(const json& key, double value, ProbedRates& out);
constexpr std::array<std::pair<const char*, Reader>, 10> kReaders{{{kGemm, read_gemm},
                                                                   {kAttention, read_attention},
                                                                   {kElementwise, read_elementwise},
                                                                   {kOptimizer, read_optimizer},
                                                                   {kDequantize, read_dequantize},
                                                                   {kBucket, read_bucket},
                                                                   {kHostLink, read_host_link},
                                                                   {kCollective, read_collective},
                                                                   {kSpeedReference, read_speed_reference},
                                                                   {kDeviceBaseline, read_device_baseline}}};

// A kind this build has no reader for (a probe it does not run) is passed over.
void read_record(const json& key, double value, ProbedRates& out) {
    const std::string kind = key.at("probe").get<std::string>();
    for (const auto& [name, read] : kReaders)
        if (kind == name) return read(key, value, out);
}

// `read`'s result, or nullopt when the key is not that probe's.
template <typename Read>
auto or_nullopt(const Read& read) -> std::optional<decltype(read())> {
    try {
        return read();
    } catch (const json::exception&) {  // not an object, a field missing or of another type
    } catch (const NotAProbe&) {
    }
    return std::nullopt;
}

}  // namespace

// An fp32 probe's name has no dtype (as it read before collectives were probed per dtype).
std::string collective_record_name(const CollectiveRate& c) {
    std::string name = fmt::format("busbw {} n={} bytes={}", word_of(c.op, kCollectiveOps), c.ranks, c.bytes);
    if (c.dtype != ProbeDtype::f32) name += fmt::format(" {}", probe_dtype_name(c.dtype));
    return name;
}

json probe_key(const CollectiveRate& c) {
    return {{"probe", kCollective},
            {"op", word_of(c.op, kCollectiveOps)},
            {"ranks", c.ranks},
            {"bytes", c.bytes},
            {"dtype", probe_dtype_name(c.dtype)}};
}

std::optional<CollectiveRate> collective_from_key(const json& key) {
    return or_nullopt([&] { return collective_of(key); });
}

std::string optimizer_record_name(const OptimizerRate& r) {
    std::string tensors;
    for (const TensorShape& t : r.tensors)
        tensors += fmt::format("{}{}x{}", tensors.empty() ? "" : ",", t.rows, t.cols);
    return fmt::format("optimizer {} {} block={} tensors={}{}", to_string(r.optimizer), to_string(r.precision), r.block,
                       tensors, r.host ? " on the host" : "");
}

json probe_key(const OptimizerRate& r) {
    json tensors = json::array();
    for (const TensorShape& t : r.tensors) tensors.push_back(json::array({t.rows, t.cols}));
    json key{{"probe", kOptimizer},
             {"optimizer", std::string(to_string(r.optimizer))},
             {"precision", std::string(to_string(r.precision))},
             {"block", r.block},
             {"tensors", std::move(tensors)}};
    put_where(key, r.host);
    return key;
}

std::optional<OptimizerRate> optimizer_from_key(const json& key) {
    return or_nullopt([&] { return optimizer_of(key); });
}

std::vector<ProbeRecord> records_of(const ProbedRates& rates) {
    std::vector<ProbeRecord> out;
    for (const GemmRate& g : rates.gemm) out.push_back(record(name_of(g), probe_key(g), g.flops_per_s, "FLOP/s"));
    for (const AttentionRate& a : rates.attention)
        for (const auto& [time, word] : kAttentionPasses)
            out.push_back(time_record(name_of(a), probe_key(a), "pass", word, a.*time));
    for (const ElementwiseRate& e : rates.elementwise)
        for (const auto& [time, word] : kElementwiseParts)
            out.push_back(time_record(name_of(e), probe_key(e), "part", word, e.*time));
    for (const OptimizerRate& o : rates.optimizers)
        out.push_back(record(optimizer_record_name(o), probe_key(o), o.seconds, "s"));
    for (const DequantizeRate& d : rates.dequantize) out.push_back(record(name_of(d), probe_key(d), d.layer_s, "s"));
    for (const BucketRate& b : rates.buckets) out.push_back(record(name_of(b), probe_key(b), b.seconds, "s"));
    for (const HostLinkRate& l : rates.host_links)
        out.push_back(record(name_of(l), probe_key(l), l.bytes_per_s, "B/s"));
    if (rates.speed_reference_s > 0)
        out.push_back(record(speed_reference_name(), speed_reference_key(), rates.speed_reference_s, "s"));
    if (rates.device_baseline_bytes)
        out.push_back(
            record("device baseline", device_baseline_key(), static_cast<double>(*rates.device_baseline_bytes), "B"));
    for (const CollectiveRate& c : rates.collectives)
        out.push_back(record(collective_record_name(c), probe_key(c), c.bus_bytes_per_s, "B/s"));
    return out;
}

ProbedRates rates_of(const std::vector<ProbeRecord>& records) {
    ProbedRates out;
    for (const ProbeRecord& r : records) {
        try {
            read_record(json::parse(r.key), r.value, out);
        } catch (const json::exception&) {  // not JSON, a field missing or of another type: skipped
        } catch (const NotAProbe&) {        // a word or size no probe has: skipped
        }
    }
    return out;
}

}  // namespace tune::probe

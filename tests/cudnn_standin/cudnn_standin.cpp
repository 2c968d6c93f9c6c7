// A stand-in for libcudnn.so.9's backend API, written for tune's tests: it
// accepts exactly the attention graphs kernels/cuda/host/sdpa_graph builds and
// runs them on host-addressable memory (the emulated device's, or plain host
// buffers) with a float reference. What it checks, as cuDNN would refuse:
//   - each attribute's type and element count, per descriptor type;
//   - at finalize, that a tensor has its id, type, dims and strides, and that an
//     operation names finalized descriptors with matching shapes;
//   - that an operation graph is the forward (14 operations) or backward (23,
//     or 25 with grouped KV heads: dK and dV summed over each group) pattern,
//     else NOT_SUPPORTED_GRAPH_PATTERN;
//   - at execution, every bound tensor's id and pointer, the workspace, and
//     that the dQ accumulator arrives zeroed.
// One engine configuration; its workspace is the bound the estimate counts
// (kernels/workspace_bytes.h cudnn_attention_plan_bytes). On the emulated
// device an execution on a capturing stream (cudnnSetStream's) is recorded
// into the graph, with the scale it was given, and runs at each launch.
// For fault tests: FAKE_CUDNN_SET_FAIL=ATTRIBUTE:STATUS, FAKE_CUDNN_FINALIZE_FAIL=
// TYPE:STATUS, FAKE_CUDNN_ENGINES=N (configurations offered, default 1).
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/math/half.h"
#include "kernels/workspace_bytes.h"

namespace {

enum Status : int {
    kOk = 0,
    kBadParam = 2000,
    kNullPointer = 2002,
    kNotFinalized = 2004,
    kShapeMismatch = 2008,
    kAttributeType = 2010,
    kDescriptorType = 2012,
    kNotSupportedPattern = 3001,
    kExecutionFailed = 5000,
};

// Descriptor types, attribute types and names: cudnn_graph.h's numbers (kernels/cuda/host/cudnn_enums.h names them).
enum Type : int {
    kPointwise = 0,
    kEngineConfig = 3,
    kHeuristics = 4,
    kPlan = 5,
    kOpPointwise = 13,
    kOpGraph = 15,
    kVariantPack = 16,
    kTensor = 17,
    kMatmul = 18,
    kOpMatmul = 19,
    kReduction = 21,
    kOpReduction = 22,
    kOpReshape = 31
};
enum AttrType : int {
    tHandle = 0,
    tDataType = 1,
    tBool = 2,
    tInt64 = 3,
    tVoidPtr = 6,
    tHeurMode = 8,
    tPointwiseMode = 14,
    tDescriptor = 15,
    tReductionOp = 18,
    tReordering = 20
};

struct Rule {
    int descriptor, name, type;
    std::int64_t min_count, max_count;
};
// Every attribute tune's graphs set, with its type and element count.
constexpr Rule kRules[] = {
    {kTensor, 906, tInt64, 1, 1},
    {kTensor, 901, tDataType, 1, 1},
    {kTensor, 902, tInt64, 1, 8},
    {kTensor, 903, tInt64, 1, 8},
    {kTensor, 900, tInt64, 1, 1},
    {kTensor, 907, tBool, 1, 1},
    {kTensor, 908, tBool, 1, 1},
    {kTensor, 909, tReordering, 1, 1},
    {kPointwise, 0, tPointwiseMode, 1, 1},
    {kPointwise, 1, tDataType, 1, 1},
    {kPointwise, 9, tInt64, 1, 1},
    {kOpPointwise, 750, tDescriptor, 1, 1},
    {kOpPointwise, 751, tDescriptor, 1, 1},
    {kOpPointwise, 752, tDescriptor, 1, 1},
    {kOpPointwise, 753, tDescriptor, 1, 1},
    {kOpPointwise, 758, tDescriptor, 1, 1},
    {kMatmul, 1500, tDataType, 1, 1},
    {kOpMatmul, 1520, tDescriptor, 1, 1},
    {kOpMatmul, 1521, tDescriptor, 1, 1},
    {kOpMatmul, 1522, tDescriptor, 1, 1},
    {kOpMatmul, 1523, tDescriptor, 1, 1},
    {kReduction, 1600, tReductionOp, 1, 1},
    {kReduction, 1601, tDataType, 1, 1},
    {kOpReduction, 1610, tDescriptor, 1, 1},
    {kOpReduction, 1611, tDescriptor, 1, 1},
    {kOpReduction, 1612, tDescriptor, 1, 1},
    {kOpReshape, 2200, tDescriptor, 1, 1},
    {kOpReshape, 2201, tDescriptor, 1, 1},
    {kOpGraph, 800, tHandle, 1, 1},
    {kOpGraph, 801, tDescriptor, 1, 64},
    {kHeuristics, 200, tHeurMode, 1, 1},
    {kHeuristics, 201, tDescriptor, 1, 1},
    {kPlan, 400, tHandle, 1, 1},
    {kPlan, 401, tDescriptor, 1, 1},
    {kVariantPack, 1000, tInt64, 1, 64},
    {kVariantPack, 1001, tVoidPtr, 1, 64},
    {kVariantPack, 1003, tVoidPtr, 1, 1},
};

std::size_t element_bytes(int type) {
    switch (type) {
        case tBool:
            return sizeof(bool);
        case tInt64:
            return 8;
        case tHandle:
        case tVoidPtr:
        case tDescriptor:
            return sizeof(void*);
        default:
            return sizeof(int);
    }
}

struct Desc;

struct Attr {
    int type = 0;
    std::vector<unsigned char> bytes;
    std::int64_t count = 0;
    std::int64_t int64(std::size_t i = 0) const {
        std::int64_t v;
        std::memcpy(&v, bytes.data() + 8 * i, 8);
        return v;
    }
    int enumerated() const {
        int v;
        std::memcpy(&v, bytes.data(), sizeof v);
        return v;
    }
    bool boolean() const { return bytes[0] != 0; }
    void* pointer(std::size_t i = 0) const {
        void* p;
        std::memcpy(&p, bytes.data() + sizeof(void*) * i, sizeof p);
        return p;
    }
};

// Which attention graph an operation graph is, once matched.
enum class Graph { none, forward, backward };

struct Desc {
    int type = 0;
    bool finalized = false;
    std::map<int, Attr> attrs;
    Graph graph = Graph::none;              // operation graphs, engine configurations and plans
    std::map<std::int64_t, Desc*> tensors;  // operation graphs: every non-virtual tensor by id
    const Attr* get(int name) const {
        auto it = attrs.find(name);
        return it == attrs.end() ? nullptr : &it->second;
    }
    Desc* desc(int name) const {
        const Attr* a = get(name);
        return a ? static_cast<Desc*>(a->pointer()) : nullptr;
    }
};

bool injected(const char* variable, long key, int* status) {
    const char* text = std::getenv(variable);
    long want = 0;
    return text != nullptr && std::sscanf(text, "%ld:%d", &want, status) == 2 && want == key;
}

std::vector<std::int64_t> int64s(const Desc& d, int name) {
    std::vector<std::int64_t> out;
    if (const Attr* a = d.get(name))
        for (std::int64_t i = 0; i < a->count; ++i) out.push_back(a->int64(static_cast<std::size_t>(i)));
    return out;
}

int finalize_tensor(Desc& d) {
    for (int name : {906, 901, 902, 903})
        if (!d.get(name)) return kBadParam;
    if (d.get(902)->count != d.get(903)->count) return kShapeMismatch;
    for (std::int64_t v : int64s(d, 902))
        if (v <= 0) return kBadParam;
    return kOk;
}

// Each descriptor an operation names is there and finalized.
int named_finalized(const Desc& d, std::initializer_list<int> required) {
    for (int name : required) {
        const Desc* x = d.desc(name);
        if (x == nullptr) return kBadParam;
        if (!x->finalized) return kNotFinalized;
    }
    return kOk;
}

int finalize_matmul(const Desc& d) {
    if (const int s = named_finalized(d, {1520, 1521, 1522, 1523}); s != kOk) return s;
    const auto a = int64s(*d.desc(1520), 902), b = int64s(*d.desc(1521), 902), c = int64s(*d.desc(1522), 902);
    if (a.size() != 4 || b.size() != 4 || c.size() != 4) return kShapeMismatch;
    // (batch, heads, m, k) x (batch, heads', k, n) = (batch, heads, m, n); heads' divides heads.
    if (a[3] != b[2] || c[2] != a[2] || c[3] != b[3] || a[0] != c[0] || b[0] != c[0]) return kShapeMismatch;
    if (a[1] != c[1] || c[1] % b[1] != 0) return kShapeMismatch;
    return kOk;
}

// y = reduction of x: each of y's dimensions is x's, 1 (summed over) or divides
// x's (a sum over groups of consecutive indices, as of query heads into key/value heads).
int finalize_reduction(const Desc& d) {
    if (const int s = named_finalized(d, {1610, 1611, 1612}); s != kOk) return s;
    const auto x = int64s(*d.desc(1610), 902), y = int64s(*d.desc(1611), 902);
    if (x.size() != y.size()) return kShapeMismatch;
    for (std::size_t i = 0; i < x.size(); ++i)
        if (x[i] % y[i] != 0) return kShapeMismatch;
    return kOk;
}

// The operation's signature for the pattern: M matmul, S reshape, R<op>, P<mode>.
std::string signature(const Desc& op) {
    switch (op.type) {
        case kOpMatmul:
            return "M";
        case kOpReshape:
            return "S";
        case kOpReduction:
            return "R" + std::to_string(op.desc(1612)->get(1600)->enumerated());
        case kOpPointwise:
            return "P" + std::to_string(op.desc(750)->get(0)->enumerated());
        default:
            return "?";
    }
}

const std::string kForward = "M P1 P501 P501 P303 P601 R3 P9 P13 R0 P15 P0 P6 M ";
const std::string kBackward = "P1 R0 P1 M P1 P501 P501 P303 P601 P9 P13 S M M P1 P9 P1 P1 S M S M P21 ";
const std::string kBackwardGrouped = "P1 R0 P1 M P1 P501 P501 P303 P601 P9 P13 S M R0 M P1 P9 P1 P1 S M R0 S M P21 ";

void collect_tensors(Desc& graph, const Desc& op) {
    for (const auto& [name, attr] : op.attrs)
        if (attr.type == tDescriptor) {
            auto* t = static_cast<Desc*>(attr.pointer());
            if (t->type == kTensor && !t->get(907)->boolean()) graph.tensors[t->get(906)->int64()] = t;
        }
}

int finalize_graph(Desc& d) {
    const Attr* ops = d.get(801);
    if (ops == nullptr || d.get(800) == nullptr) return kBadParam;
    std::string pattern;
    for (std::int64_t i = 0; i < ops->count; ++i) {
        const auto* op = static_cast<Desc*>(ops->pointer(static_cast<std::size_t>(i)));
        if (!op->finalized) return kNotFinalized;
        pattern += signature(*op) + " ";
        collect_tensors(d, *op);
    }
    d.graph = pattern == kForward                                   ? Graph::forward
              : pattern == kBackward || pattern == kBackwardGrouped ? Graph::backward
                                                                    : Graph::none;
    return d.graph == Graph::none ? kNotSupportedPattern : kOk;
}

int finalize(Desc& d) {
    switch (d.type) {
        case kTensor:
            return finalize_tensor(d);
        case kPointwise:
            return d.get(0) && d.get(1) ? kOk : kBadParam;
        case kMatmul:
            return d.get(1500) ? kOk : kBadParam;
        case kReduction:
            return d.get(1600) && d.get(1601) ? kOk : kBadParam;
        case kOpPointwise:
            return named_finalized(d, {750, 751, 753});
        case kOpMatmul:
            return finalize_matmul(d);
        case kOpReduction:
            return finalize_reduction(d);
        case kOpReshape:
            return named_finalized(d, {2200, 2201});
        case kOpGraph:
            return finalize_graph(d);
        case kHeuristics:
            return d.get(200) && named_finalized(d, {201}) == kOk ? kOk : kBadParam;
        case kPlan: {
            const Desc* config = d.desc(401);
            if (config == nullptr || d.get(400) == nullptr || config->graph == Graph::none) return kBadParam;
            d.graph = config->graph;
            d.tensors = config->tensors;
            return kOk;
        }
        case kVariantPack:
            return d.get(1000) && d.get(1001) && d.get(1000)->count == d.get(1001)->count ? kOk : kBadParam;
        default:
            return kOk;
    }
}

// ---- the reference computation -------------------------------------------

// One bound tensor: its element (i0, i1, i2, i3) through its strides, in its type.
struct View {
    unsigned char* base = nullptr;
    std::vector<std::int64_t> dims, strides;
    int type = 0;  // 0 f32, 2 f16, 9 bf16
    std::size_t offset(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) const {
        return static_cast<std::size_t>(a * strides[0] + b * strides[1] + c * strides[2] + d * strides[3]);
    }
    float get(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) const {
        const std::size_t i = offset(a, b, c, d);
        if (type == 0) {
            float f;
            std::memcpy(&f, base + 4 * i, 4);
            return f;
        }
        std::uint16_t bits;
        std::memcpy(&bits, base + 2 * i, 2);
        return type == 9 ? tune::math::to_float(tune::math::bf16{bits}) : tune::math::to_float(tune::math::fp16{bits});
    }
    void set(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d, float v) const {
        const std::size_t i = offset(a, b, c, d);
        if (type == 0) {
            std::memcpy(base + 4 * i, &v, 4);
            return;
        }
        const std::uint16_t bits = type == 9 ? tune::math::to_bf16(v).bits : tune::math::to_fp16(v).bits;
        std::memcpy(base + 2 * i, &bits, 2);
    }
};

struct Bound {
    std::map<std::int64_t, View> views;
    std::map<std::int64_t, void*> pointers;
    const View& operator[](std::int64_t uid) const { return views.at(uid); }
    float value(std::int64_t uid) const {
        float f;
        std::memcpy(&f, pointers.at(uid), 4);
        return f;
    }
};

// Scores of query row i against key j <= i, scaled, with the row's log-sum-exp.
float score(const Bound& t, std::int64_t b, std::int64_t h, std::int64_t g, std::int64_t i, std::int64_t j,
            std::int64_t dim, float scale) {
    float s = 0;
    for (std::int64_t d = 0; d < dim; ++d) s += t[1].get(b, h, i, d) * t[2].get(b, g, d, j);
    return s * scale;
}

void forward(const Bound& t) {
    const View& q = t[1];
    const std::int64_t B = q.dims[0], H = q.dims[1], S = q.dims[2], D = q.dims[3], group = H / t[2].dims[1];
    const float scale = t.value(6);
    std::vector<float> p(static_cast<std::size_t>(S));
    for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t h = 0; h < H; ++h)
            for (std::int64_t i = 0; i < S; ++i) {
                float m = -std::numeric_limits<float>::infinity(), l = 0;
                for (std::int64_t j = 0; j <= i; ++j) m = std::max(m, p[j] = score(t, b, h, h / group, i, j, D, scale));
                for (std::int64_t j = 0; j <= i; ++j) l += p[j] = std::exp(p[j] - m);
                t[5].set(b, h, i, 0, m + std::log(l));
                for (std::int64_t d = 0; d < D; ++d) {
                    float o = 0;
                    for (std::int64_t j = 0; j <= i; ++j) o += p[j] / l * t[3].get(b, h / group, j, d);
                    t[4].set(b, h, i, d, o);
                }
            }
}

// One key/value head's gradients: dK and dV summed over its group of query heads.
void backward(const Bound& t) {
    const View& q = t[1];
    const std::int64_t B = q.dims[0], H = q.dims[1], S = q.dims[2], D = q.dims[3], group = H / t[2].dims[1];
    const float scale = t.value(6);
    for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t g = 0; g < H / group; ++g) {
            std::vector<float> dk(S * D, 0), dv(S * D, 0);
            for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
                // dQ in float first: it may share memory with dO.
                std::vector<float> dq(S * D, 0);
                for (std::int64_t i = 0; i < S; ++i) {
                    float rowsum = 0;
                    for (std::int64_t d = 0; d < D; ++d) rowsum += t[8].get(b, h, i, d) * t[4].get(b, h, i, d);
                    for (std::int64_t j = 0; j <= i; ++j) {
                        const float p = std::exp(score(t, b, h, g, i, j, D, scale) - t[5].get(b, h, i, 0));
                        float dp = 0;
                        for (std::int64_t d = 0; d < D; ++d) dp += t[8].get(b, h, i, d) * t[3].get(b, g, d, j);
                        const float ds = p * (dp - rowsum) * scale;
                        for (std::int64_t d = 0; d < D; ++d) {
                            dv[j * D + d] += p * t[8].get(b, h, i, d);
                            dk[j * D + d] += ds * t[1].get(b, h, i, d);
                            dq[i * D + d] += ds * t[2].get(b, g, d, j);
                        }
                    }
                }
                for (std::int64_t s = 0; s < S; ++s)
                    for (std::int64_t d = 0; d < D; ++d) t[9].set(b, h, s, d, dq[s * D + d]);
            }
            for (std::int64_t s = 0; s < S; ++s)
                for (std::int64_t d = 0; d < D; ++d) {
                    t[10].set(b, g, s, d, dk[s * D + d]);
                    t[11].set(b, g, s, d, dv[s * D + d]);
                }
        }
}

int bind(const Desc& plan, const Desc& pack, Bound& out) {
    const Attr& ids = *pack.get(1000);
    const Attr& pointers = *pack.get(1001);
    for (std::int64_t i = 0; i < ids.count; ++i)
        out.pointers[ids.int64(static_cast<std::size_t>(i))] = pointers.pointer(static_cast<std::size_t>(i));
    for (const auto& [uid, tensor] : plan.tensors) {
        auto it = out.pointers.find(uid);
        if (it == out.pointers.end() || it->second == nullptr) return kNullPointer;
        View v{static_cast<unsigned char*>(it->second), int64s(*tensor, 902), int64s(*tensor, 903),
               tensor->get(901)->enumerated()};
        out.views[uid] = v;
    }
    return kOk;
}

// One execution, bound: the tensors' addresses as the variant pack gave them,
// and the attention scale (passed by value) copied, so a recorded execution
// runs later with the scale it was given.
struct Work {
    Graph graph = Graph::forward;
    Bound t;
    float scale = 0;
};

int prepare(const Desc& plan, const Desc& pack, Work& w) {
    if (const int s = bind(plan, pack, w.t); s != kOk) return s;
    const Attr* workspace = pack.get(1003);
    if (workspace == nullptr || workspace->pointer() == nullptr) return kNullPointer;
    w.graph = plan.graph;
    w.scale = w.t.value(6);
    w.t.pointers[6] = &w.scale;  // w lives on the heap until it has run
    return kOk;
}

int execute(const Work& w) {
    if (w.graph == Graph::forward) {
        forward(w.t);
        return kOk;
    }
    const View& accumulator = w.t[13];
    const std::int64_t n = accumulator.dims[0] * accumulator.dims[1] * accumulator.dims[2] * accumulator.dims[3];
    for (std::int64_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, accumulator.base + 4 * i, 4);
        if (f != 0.0f) return kExecutionFailed;  // the caller must zero it
    }
    backward(w.t);
    return kOk;
}

// Replayed from a graph: no caller to return a status to.
void execute_recorded(void* work) {
    if (execute(*static_cast<Work*>(work)) != kOk) {
        std::fprintf(stderr, "cudnn stand-in: a recorded backward found its dQ accumulator not zeroed\n");
        std::abort();
    }
}
void release_work(void* work) { delete static_cast<Work*>(work); }

// The emulated runtime's recorder (tests/cuda_emu/runtime), where the test that loaded this library has one.
using RecordHook = int (*)(void*, void (*)(void*), void*, void (*)(void*));
RecordHook record_hook() {
    static const auto hook = reinterpret_cast<RecordHook>(dlsym(RTLD_DEFAULT, "tune_emu_record_if_capturing"));
    return hook;
}

// The stream cudnnSetStream gave a handle.
struct Handle {
    void* stream = nullptr;
};

// On a capturing stream the work is recorded, as cuDNN's kernels are on a GPU; else it runs now.
int run(const Handle& h, const Desc& plan, const Desc& pack) {
    auto w = std::make_unique<Work>();
    if (const int s = prepare(plan, pack, *w); s != kOk) return s;
    const RecordHook hook = record_hook();
    if (hook != nullptr && hook(h.stream, execute_recorded, w.get(), release_work)) {
        static_cast<void>(w.release());  // the graph owns it now
        return kOk;
    }
    return execute(*w);
}

std::int64_t workspace_of(const Desc& plan) {
    const View q{nullptr, int64s(*plan.tensors.at(1), 902), {}, 0};
    return static_cast<std::int64_t>(tune::kernels::workspace::cudnn_attention_plan_bytes(
        static_cast<std::uint64_t>(q.dims[0]), static_cast<std::uint64_t>(q.dims[1]),
        static_cast<std::uint64_t>(q.dims[2]), plan.graph == Graph::backward));
}

}  // namespace

extern "C" {

std::size_t cudnnGetVersion() { return 91900; }

const char* cudnnGetErrorString(int s) {
    switch (s) {
        case kOk:
            return "CUDNN_STATUS_SUCCESS";
        case kBadParam:
            return "CUDNN_STATUS_BAD_PARAM";
        case kNullPointer:
            return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
        case kNotFinalized:
            return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
        case kShapeMismatch:
            return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
        case kAttributeType:
            return "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE";
        case kDescriptorType:
            return "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE";
        case kNotSupportedPattern:
            return "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN";
        case 3002:
            return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
        case kExecutionFailed:
            return "CUDNN_STATUS_EXECUTION_FAILED";
        default:
            return "CUDNN_STATUS_(stand-in)";
    }
}

int cudnnCreate(void** handle) {
    *handle = new Handle;
    return kOk;
}
int cudnnDestroy(void* handle) {
    delete static_cast<Handle*>(handle);
    return kOk;
}
int cudnnSetStream(void* handle, void* stream) {
    if (handle == nullptr) return kNullPointer;
    static_cast<Handle*>(handle)->stream = stream;
    return kOk;
}

int cudnnBackendCreateDescriptor(int type, void** descriptor) {
    auto* d = new Desc;
    d->type = type;
    *descriptor = d;
    return kOk;
}

int cudnnBackendDestroyDescriptor(void* descriptor) {
    delete static_cast<Desc*>(descriptor);
    return kOk;
}

int cudnnBackendSetAttribute(void* descriptor, int name, int type, std::int64_t count, const void* elements) {
    int status = 0;
    if (injected("FAKE_CUDNN_SET_FAIL", name, &status)) return status;
    auto* d = static_cast<Desc*>(descriptor);
    if (d == nullptr || elements == nullptr) return kNullPointer;
    for (const Rule& r : kRules)
        if (r.descriptor == d->type && r.name == name) {
            if (r.type != type) return kAttributeType;
            if (count < r.min_count || count > r.max_count) return kBadParam;
            Attr& a = d->attrs[name];
            a.type = type;
            a.count = count;
            const auto* bytes = static_cast<const unsigned char*>(elements);
            a.bytes.assign(bytes, bytes + element_bytes(type) * static_cast<std::size_t>(count));
            return kOk;
        }
    return kBadParam;  // no attribute of that name on this descriptor type
}

int cudnnBackendGetAttribute(void* descriptor, int name, int type, std::int64_t wanted, std::int64_t* count,
                             void* elements) {
    const auto* d = static_cast<const Desc*>(descriptor);
    if (name == 202 && type == tDescriptor) {  // the heuristics' engine configurations
        const char* text = std::getenv("FAKE_CUDNN_ENGINES");
        const std::int64_t offered = std::min<std::int64_t>(text != nullptr ? std::atol(text) : 1, wanted);
        const Desc* graph = d->desc(201);
        for (std::int64_t i = 0; i < offered; ++i) {
            auto* config = static_cast<Desc*>(static_cast<void**>(elements)[i]);
            if (config == nullptr || config->type != kEngineConfig) return kDescriptorType;
            config->graph = graph->graph;
            config->tensors = graph->tensors;
            config->finalized = true;
        }
        *count = offered;
        return kOk;
    }
    if (name == 402 && type == tInt64 && d->type == kPlan && d->finalized) {  // the plan's workspace
        const std::int64_t bytes = workspace_of(*d);
        std::memcpy(elements, &bytes, sizeof bytes);
        *count = 1;
        return kOk;
    }
    return kBadParam;
}

int cudnnBackendFinalize(void* descriptor) {
    auto* d = static_cast<Desc*>(descriptor);
    int status = 0;
    if (injected("FAKE_CUDNN_FINALIZE_FAIL", d->type, &status)) return status;
    status = finalize(*d);
    if (status == kOk) d->finalized = true;
    return status;
}

int cudnnBackendExecute(void* handle, void* plan, void* pack) {
    const auto* p = static_cast<const Desc*>(plan);
    const auto* v = static_cast<const Desc*>(pack);
    if (handle == nullptr || p == nullptr || v == nullptr) return kNullPointer;
    if (!p->finalized || !v->finalized) return kNotFinalized;
    return run(*static_cast<const Handle*>(handle), *p, *v);
}

}  // extern "C"

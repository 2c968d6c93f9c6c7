// Fuzz group (label fuzz): seeded random mutations of the example sweep files,
// of a config.json and of safetensors headers, run through `tune validate`,
// `tune estimate` and `tune trial --steps 1` on the tiny fixture model. Each
// run must end by itself with exit 0, 1 or 2 and say something, within a
// time limit and an address-space limit (prlimit), never by a signal. `tune
// trial` also has its documented status codes (3 oom, 4 invalid, 5 failed),
// accepted only with the JSON result that states that status.
//
// The seeds are fixed, so a failure reproduces: the failing input is kept in
// build/fuzz-failures/ and named in the message.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "launch/process.h"

namespace fs = std::filesystem;

namespace {

constexpr double kTimeoutS = 30;                     // per run; the slowest honest run takes well under 1 s
constexpr const char* kAddressSpace = "--as=4294967296";  // 4 GiB: a runaway allocation fails, it does not swap

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// Tokens that tend to reach corners: syntax, limits, wrong types, escapes.
const std::vector<std::string> kTokens{
    "[", "]", "{", "}", "=", "\"", "'", ".", ",", "\n", "#", "[[x]]", "[a.b.c]", "-1", "0", "1e400", "-1e400",
    "nan", "inf", "-inf", "true", "\"\\u001b[2J\"", "18446744073709551616", "9223372036854775807", "4294967296",
    "0.0", "1e-400", "\"\"", "[]", "{}", "null", "\"llama\"", "2147483648", "65536", "\\", "\x1b", "\xff\xfe"};

class Mutator {
public:
    explicit Mutator(std::uint64_t seed) : rng_(seed) {}

    std::size_t below(std::size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }

    std::string mutate(std::string text) {
        const std::size_t edits = 1 + below(4);
        for (std::size_t e = 0; e < edits; ++e) {
            const std::size_t at = below(text.size() + 1);
            switch (below(6)) {
                case 0:  // flip a byte
                    if (!text.empty()) text[std::min(at, text.size() - 1)] ^= static_cast<char>(1 + below(255));
                    break;
                case 1:  // delete a run
                    text.erase(std::min(at, text.size()), below(32));
                    break;
                case 2:  // duplicate a run
                    text.insert(at, text.substr(std::min(at, text.size()), below(64)));
                    break;
                case 3:  // insert a token
                    text.insert(at, kTokens[below(kTokens.size())]);
                    break;
                case 4:  // replace the number nearest `at` with a token
                    replace_number(text, at);
                    break;
                default:  // copy a run from elsewhere in the file
                    text.insert(at, text.substr(below(text.size() + 1), below(48)));
                    break;
            }
        }
        return text;
    }

    // A JSON-aware change: one field of an object gets a hostile value.
    nlohmann::json mutate_json(nlohmann::json j) {
        if (!j.is_object() || j.empty()) return j;
        auto it = j.begin();
        std::advance(it, static_cast<std::ptrdiff_t>(below(j.size())));
        static const std::vector<nlohmann::json> values{-32,  0,  -1, 1e300, -1e-5, "small", nullptr, true,
                                                        nlohmann::json::array(), nlohmann::json::object(),
                                                        std::uint64_t{1} << 62, 3, 65, 1 << 20, 0.5};
        it.value() = values[below(values.size())];
        return j;
    }

private:
    void replace_number(std::string& text, std::size_t at) {
        const std::size_t start = text.find_first_of("0123456789", std::min(at, text.size()));
        if (start == std::string::npos) return;
        const std::size_t end = text.find_first_not_of("0123456789.eE_", start);
        text.replace(start, (end == std::string::npos ? text.size() : end) - start, kTokens[below(kTokens.size())]);
    }

    std::mt19937_64 rng_;
};

struct Fuzzer {
    fs::path dir = fs::path(TUNE_BUILD_DIR) / "fuzz-work";
    fs::path failures = fs::path(TUNE_BUILD_DIR) / "fuzz-failures";
    int runs = 0;

    Fuzzer(const std::string& name) {
        dir /= name;
        fs::remove_all(dir);
        fs::create_directories(dir);
        fs::create_directories(failures);
    }

    // Runs `tune ARGS` under the limits and checks how it ended; `input` is kept on failure.
    void run(const std::vector<std::string>& args, const fs::path& input, bool trial = false) {
        ++runs;
        tune::ProcessSpec spec;
        spec.argv = {"prlimit", kAddressSpace, "--cpu=60", "--", TUNE_BINARY};
        spec.argv.insert(spec.argv.end(), args.begin(), args.end());
        spec.timeout_s = kTimeoutS;
        spec.env = {{"OMP_NUM_THREADS", "1"}};
        const tune::ProcessOutcome out = run_process(spec);
        bool ok = !out.timed_out && out.term_signal == 0 && out.exit_code >= 0;
        ok = ok && !(out.stdout_text.empty() && out.stderr_tail.empty());
        if (out.exit_code == 2) ok = ok && out.stderr_tail.find("error:") != std::string::npos;
        if (out.exit_code >= 3) ok = ok && trial && status_line_says(out.stdout_text, out.exit_code);
        if (out.exit_code > 5) ok = false;
        if (!ok) {
            const fs::path kept = failures / fmt::format("{}-{}", runs, input.filename().string());
            fs::copy(input, kept, fs::copy_options::overwrite_existing | fs::copy_options::recursive);
            FAIL_CHECK(fmt::format("tune {} ended with {}; input kept at {}\nstderr: {}", fmt::join(args, " "),
                                   out.describe(), kept.string(), out.stderr_tail));
        }
    }

    // The trial's last stdout line is a TrialResult whose status matches its exit code.
    static bool status_line_says(const std::string& stdout_text, int code) {
        const std::size_t end = stdout_text.find_last_not_of('\n');
        if (end == std::string::npos) return false;
        const std::size_t start = stdout_text.rfind('\n', end);
        const auto j = nlohmann::json::parse(stdout_text.substr(start == std::string::npos ? 0 : start + 1), nullptr, false);
        if (!j.is_object() || !j.contains("status") || !j["status"].is_string()) return false;
        const std::string s = j["status"].get<std::string>();
        return (code == 3 && s == "oom") || (code == 4 && s == "invalid") || (code == 5 && s == "failed");
    }
};

const fs::path kSource = TUNE_SOURCE_DIR;
const fs::path kTiny = kSource / "tests/fixtures/torch/llama_tiny";

}  // namespace

TEST_CASE("fuzz: mutated sweep files through validate and estimate", "[fuzz]") {
    Fuzzer f("sweeps");
    std::vector<std::string> seeds{slurp(kSource / "sweeps/demo.toml"), slurp(kSource / "sweeps/llama7b.toml")};
    for (const auto& e : fs::directory_iterator(kSource / "tests/sweeps_bad")) seeds.push_back(slurp(e.path()));
    Mutator m(20240611);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 240; ++i) {
        const fs::path file = f.dir / fmt::format("s{}.toml", i);
        spit(file, m.mutate(seeds[m.below(seeds.size())]));
        f.run({"validate", file.string()}, file);
        if (i % 3 == 0) f.run({"estimate", file.string()}, file);
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    WARN(fmt::format("{} runs in {:.1f} s", f.runs, took));
}

TEST_CASE("fuzz: mutated config.json through validate (hf_config) and tune trial --init", "[fuzz]") {
    Fuzzer f("config");
    const std::string config = slurp(kTiny / "config.json");
    const nlohmann::json parsed = nlohmann::json::parse(config);
    Mutator m(77031);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 90; ++i) {
        const fs::path model = f.dir / fmt::format("m{}", i);
        fs::create_directories(model);
        const std::string text = i % 2 == 0 ? m.mutate(config) : m.mutate_json(parsed).dump(2);
        spit(model / "config.json", text);
        fs::copy_file(kTiny / "model.safetensors", model / "model.safetensors");
        spit(model / "sweep.toml", "[model]\nhf_config = \"config.json\"\n[hardware]\ndevice = \"cpu\"\n[space]\ncontext = [16]\n");
        f.run({"validate", (model / "sweep.toml").string()}, model);
        if (i % 3 == 0)
            f.run({"trial", "--init", model.string(), "--steps", "1", "--warmup", "0", "--context", "16", "--threads", "1"},
                  model, true);
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    WARN(fmt::format("{} runs in {:.1f} s", f.runs, took));
}

TEST_CASE("fuzz: mutated safetensors headers through tune trial --init", "[fuzz]") {
    Fuzzer f("safetensors");
    const std::string file = slurp(kTiny / "model.safetensors");
    std::uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = header << 8 | static_cast<unsigned char>(file[static_cast<std::size_t>(i)]);
    const std::string json = file.substr(8, header), data = file.substr(8 + header);
    Mutator m(5150);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 30; ++i) {
        const fs::path model = f.dir / fmt::format("w{}", i);
        fs::create_directories(model);
        fs::copy_file(kTiny / "config.json", model / "config.json");
        std::string mutated = m.mutate(json);
        std::uint64_t length = mutated.size();
        if (i % 5 == 4) length = (std::uint64_t{1} << (m.below(63) + 1)) + m.below(1000);  // a hostile length field
        std::string bytes(8, '\0');
        for (int b = 0; b < 8; ++b) bytes[static_cast<std::size_t>(b)] = static_cast<char>((length >> (8 * b)) & 0xff);
        spit(model / "model.safetensors", bytes + mutated + data);
        f.run({"trial", "--init", model.string(), "--steps", "1", "--warmup", "0", "--context", "16", "--threads", "1"},
              model, true);
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    WARN(fmt::format("{} runs in {:.1f} s", f.runs, took));
}

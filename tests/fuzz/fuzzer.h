// The fuzz group's tools: a seeded mutator of text and JSON, and a runner that
// holds every `tune` run to the group's rules (it ends by itself with exit 0,
// 1 or 2 and says something, within a time and an address-space limit; `tune
// trial`'s status codes only with the JSON result that states them). A
// failing input is kept in build/fuzz-failures/ and named in the message.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "launch/process.h"

namespace tune::fuzz {

namespace fs = std::filesystem;

constexpr double kTimeoutS = 30;                          // per run; the slowest honest run takes well under 1 s
constexpr const char* kAddressSpace = "--as=4294967296";  // 4 GiB: a runaway allocation fails, it does not swap

inline std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void spit(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// Tokens that tend to reach corners: syntax, limits, wrong types, escapes.
const std::vector<std::string> kTokens{"[",
                                       "]",
                                       "{",
                                       "}",
                                       "=",
                                       "\"",
                                       "'",
                                       ".",
                                       ",",
                                       "\n",
                                       "#",
                                       "[[x]]",
                                       "[a.b.c]",
                                       "-1",
                                       "0",
                                       "1e400",
                                       "-1e400",
                                       "nan",
                                       "inf",
                                       "-inf",
                                       "true",
                                       "\"\\u001b[2J\"",
                                       "18446744073709551616",
                                       "9223372036854775807",
                                       "4294967296",
                                       "0.0",
                                       "1e-400",
                                       "\"\"",
                                       "[]",
                                       "{}",
                                       "null",
                                       "\"llama\"",
                                       "2147483648",
                                       "65536",
                                       "\\",
                                       "\x1b",
                                       "\xff\xfe"};

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
        static const std::vector<nlohmann::json> values{-32,
                                                        0,
                                                        -1,
                                                        1e300,
                                                        -1e-5,
                                                        "small",
                                                        nullptr,
                                                        true,
                                                        nlohmann::json::array(),
                                                        nlohmann::json::object(),
                                                        std::uint64_t{1} << 62,
                                                        3,
                                                        65,
                                                        1 << 20,
                                                        0.5};
        it.value() = values[below(values.size())];
        return j;
    }

    // Text meant to break out of where it is written: shell, a batch script's directive lines,
    // YAML, TOML, JSON, a terminal. "SENTINEL" becomes `sentinel`, a file that exists only if
    // something ran it. No NUL: the text may become a command-line argument.
    std::string hostile_text(const fs::path& sentinel) {
        static const std::vector<std::string> texts{"$(touch SENTINEL)",
                                                    "`touch SENTINEL`",
                                                    "x; touch SENTINEL",
                                                    "x\ntouch SENTINEL",
                                                    "a\nb",
                                                    "a\r\n#SBATCH --wrap=touch SENTINEL",
                                                    "it's",
                                                    "say \"hi\"",
                                                    "\x1b[2J\x1b]0;title\x07",
                                                    "\xff\xfe",
                                                    "",
                                                    "--help",
                                                    "-o",
                                                    "a b\tc",
                                                    "%s%n{}",
                                                    "../../x",
                                                    "a/b",
                                                    "#",
                                                    "\\",
                                                    "\xe2\x80\xa8",
                                                    "key: [1, {",
                                                    "[[x]]\nk = 1",
                                                    "'''\n\"\"\"",
                                                    "null",
                                                    "1e400",
                                                    "${HOME}",
                                                    "*",
                                                    std::string(5000, 'x')};
        std::string t = texts[below(texts.size())];
        if (below(3) == 0) t = "fz" + t + mutate("sweep");
        for (std::size_t at = t.find("SENTINEL"); at != std::string::npos; at = t.find("SENTINEL"))
            t.replace(at, 8, sentinel.string());
        std::erase(t, '\0');
        return t;
    }

    // A value for a database column: any SQLite type, at the edges of each.
    nlohmann::json hostile_value(const fs::path& sentinel) {
        static const std::vector<nlohmann::json> values{-1,
                                                        0,
                                                        1,
                                                        1e300,
                                                        -1e300,
                                                        0.5,
                                                        std::numeric_limits<std::int64_t>::min(),
                                                        std::uint64_t{1} << 62,
                                                        4294967297,
                                                        nullptr,
                                                        "",
                                                        "small",
                                                        "1e400",
                                                        "nan",
                                                        "{}",
                                                        "[]",
                                                        R"({"hf-trainer": {"fits": "yes"}})"};
        if (below(3) == 0) return hostile_text(sentinel);
        return values[below(values.size())];
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
    tune::ProcessOutcome run(const std::vector<std::string>& args, const fs::path& input, bool trial = false,
                             std::vector<std::pair<std::string, std::string>> env = {}) {
        ++runs;
        tune::ProcessSpec spec;
        spec.argv = {"prlimit", kAddressSpace, "--cpu=60", "--", TUNE_BINARY};
        spec.argv.insert(spec.argv.end(), args.begin(), args.end());
        spec.timeout_s = kTimeoutS;
        spec.env = std::move(env);
        spec.env.emplace_back("OMP_NUM_THREADS", "1");
        tune::ProcessOutcome out = run_process(spec);
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
        return out;
    }

    // Keeps `input` and fails the test with `what`, for checks a caller makes on an outcome.
    void reject(const fs::path& input, const std::string& what) {
        const fs::path kept = failures / fmt::format("{}-{}", runs, input.filename().string());
        fs::copy(input, kept, fs::copy_options::overwrite_existing | fs::copy_options::recursive);
        FAIL_CHECK(fmt::format("{}; input kept at {}", what, kept.string()));
    }

    // The trial's last stdout line is a TrialResult whose status matches its exit code.
    static bool status_line_says(const std::string& stdout_text, int code) {
        const std::size_t end = stdout_text.find_last_not_of('\n');
        if (end == std::string::npos) return false;
        const std::size_t start = stdout_text.rfind('\n', end);
        const auto j =
            nlohmann::json::parse(stdout_text.substr(start == std::string::npos ? 0 : start + 1), nullptr, false);
        if (!j.is_object() || !j.contains("status") || !j["status"].is_string()) return false;
        const std::string s = j["status"].get<std::string>();
        return (code == 3 && s == "oom") || (code == 4 && s == "invalid") || (code == 5 && s == "failed");
    }
};

// A safetensors file whose header is mutated; every fifth also gets a hostile length field.
inline std::string mutated_safetensors(Mutator& m, const std::string& file, int i) {
    std::uint64_t header = 0;
    for (int b = 7; b >= 0; --b) header = header << 8 | static_cast<unsigned char>(file[static_cast<std::size_t>(b)]);
    const std::string json = file.substr(8, header), data = file.substr(8 + header);
    const std::string mutated = m.mutate(json);
    std::uint64_t length = mutated.size();
    if (i % 5 == 4) length = (std::uint64_t{1} << (m.below(63) + 1)) + m.below(1000);
    std::string bytes(8, '\0');
    for (int b = 0; b < 8; ++b) bytes[static_cast<std::size_t>(b)] = static_cast<char>((length >> (8 * b)) & 0xff);
    return bytes + mutated + data;
}

const fs::path kSource = TUNE_SOURCE_DIR;
const fs::path kTiny = kSource / "tests/fixtures/torch/llama_tiny";

}  // namespace tune::fuzz

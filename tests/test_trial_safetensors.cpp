// Reading safetensors for `tune trial --init`: F32, BF16 and F16 tensors
// widen to fp32 exactly; other dtypes and malformed files are clear errors.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "train/io/safetensors.h"

using namespace tune;

namespace {

// A file with one tensor "t" of `dtype`, shape {n}, and raw little-endian bytes.
std::filesystem::path write_raw(const std::string& file, const std::string& dtype, std::int64_t n,
                                const std::vector<unsigned char>& data) {
    const auto path = std::filesystem::path(TUNE_BUILD_DIR) / file;
    const nlohmann::json header{{"t", {{"dtype", dtype}, {"shape", {n}}, {"data_offsets", {0, data.size()}}}},
                                {"__metadata__", {{"format", "pt"}}}};
    const std::string text = header.dump();
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((text.size() >> (8 * i)) & 0xff));
    out << text;
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    return path;
}

}  // namespace

TEST_CASE("safetensors BF16 and F16 tensors widen to fp32 exactly", "[trial][safetensors]") {
    // 1.0, -2.0 as bf16 (0x3f80, 0xc000) and as f16 (0x3c00, 0xc000), little-endian.
    auto bf = train::SafetensorsFile::load(write_raw("st_bf16.safetensors", "BF16", 2, {0x80, 0x3f, 0x00, 0xc0}));
    CHECK(bf.read_f32("t") == std::vector<float>{1.0f, -2.0f});
    auto hf = train::SafetensorsFile::load(write_raw("st_f16.safetensors", "F16", 2, {0x00, 0x3c, 0x00, 0xc0}));
    CHECK(hf.read_f32("t") == std::vector<float>{1.0f, -2.0f});
}

TEST_CASE("safetensors round-trips F32 through the writer", "[trial][safetensors]") {
    const auto path = std::filesystem::path(TUNE_BUILD_DIR) / "st_f32.safetensors";
    train::write_safetensors(path, {{"a", {2, 2}, {1, 2, 3, 4}}, {"b", {1}, {0.5f}}});
    const auto f = train::SafetensorsFile::load(path);
    CHECK(f.entries().size() == 2);
    CHECK(f.entries().at("a").shape == std::vector<std::int64_t>{2, 2});
    CHECK(f.read_f32("a") == std::vector<float>{1, 2, 3, 4});
    CHECK(f.read_f32("b") == std::vector<float>{0.5f});
}

TEST_CASE("safetensors errors name the tensor, its dtype and the file", "[trial][safetensors]") {
    auto f64 = train::SafetensorsFile::load(write_raw("st_f64.safetensors", "F64", 1, std::vector<unsigned char>(8)));
    CHECK_THROWS_WITH(f64.read_f32("t"), Catch::Contains("tensor t has dtype F64; supported: F32, BF16, F16"));
    CHECK_THROWS_WITH(
        train::SafetensorsFile::load(write_raw("st_short.safetensors", "F32", 4, {0, 0, 0, 0})).read_f32("t"),
        Catch::Contains("4 bytes for 4 elements"));
    const auto junk = std::filesystem::path(TUNE_BUILD_DIR) / "st_junk.safetensors";
    std::ofstream(junk) << "not a safetensors file at all";
    CHECK_THROWS_WITH(train::SafetensorsFile::load(junk), Catch::Contains("st_junk.safetensors"));
}

namespace {

// The peak resident bytes a child process adds while it loads `path` (Linux starts a child's
// peak at its resident size when forked); -1 when the child could not report.
long child_peak_growth_kib(const std::string& path) {
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(pipe_fds[0]);
        struct rusage before {
        }, after{};
        ::getrusage(RUSAGE_SELF, &before);
        try {
            train::SafetensorsFile::load(path);
        } catch (const std::exception&) {
        }
        ::getrusage(RUSAGE_SELF, &after);
        const long growth = after.ru_maxrss - before.ru_maxrss;
        (void)!::write(pipe_fds[1], &growth, sizeof growth);
        ::_exit(0);
    }
    ::close(pipe_fds[1]);
    long growth = -1;
    if (::read(pipe_fds[0], &growth, sizeof growth) != sizeof growth) growth = -1;
    ::close(pipe_fds[0]);
    ::waitpid(child, nullptr, 0);
    return growth;
}

}  // namespace

TEST_CASE("a crafted header on a large sparse file is refused from the header, before its bulk is read",
          "[safetensors]") {
    const std::string path =
        (std::filesystem::temp_directory_path() / ("tune-sparse-" + std::to_string(::getpid()) + ".safetensors"))
            .string();
    // 1 GiB, almost all a hole: a header whose one tensor claims bytes past the end.
    const std::string header = R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 2000000000]}})";
    {
        std::ofstream out(path, std::ios::binary);
        const std::uint64_t n = header.size();
        for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
        out << header;
    }
    REQUIRE(::truncate(path.c_str(), 1l << 30) == 0);
    CHECK_THROWS_WITH(train::SafetensorsFile::load(path), Catch::Contains("outside the") && Catch::Contains(path));
    // Read whole, the file would add 1 GiB (twice that with the copy); judged from its header, a few MiB.
    const long growth = child_peak_growth_kib(path);
    INFO("peak growth " << growth << " KiB");
    CHECK(growth >= 0);
    CHECK(growth < 64 * 1024);
    std::filesystem::remove(path);
}

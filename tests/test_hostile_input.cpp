// Hostile files and paths given to the CLI: oversized or deeply nested sweep
// files, devices and FIFOs where files belong, config.json values of the wrong
// type or range, overlapping safetensors, terminal escapes in names, report
// paths that are not regular files, impossible resources. Every one exits 2
// with a message, and leaves nothing behind.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "core/output_file.h"
#include "reports/report_error.h"
#include "reports/text_table.h"
#include "store/store.h"
#include "sweep/spec.h"
#include "tests/support/run_command.h"
#include "tests/test_store_support.h"
#include "train/io/safetensors.h"

using namespace tune;
using tune::test::run_command;
using tune::test::run_tune;
namespace fs = std::filesystem;

namespace {

const std::string kFixture = std::string(TUNE_SOURCE_DIR) + "/tests/fixtures/torch/llama_tiny";

const char* kTiny = "[model]\npreset = \"tiny\"\n[hardware]\ndevice = \"cpu\"\n[space]\ncontext = [64]\n";

// Files in `dir` whose names start with `prefix` (temporary files left behind).
int leftovers(const fs::path& dir) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir))
        n += e.path().filename().string().find(".tmp") != std::string::npos ||
             e.path().filename().string().rfind(".r.html.", 0) == 0;
    return n;
}

void write_config(const fs::path& dir, const std::string& field, const std::string& value) {
    fs::create_directories(dir);
    std::ifstream in(kFixture + "/config.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto at = text.find("\"" + field + "\"");
    REQUIRE(at != std::string::npos);
    const auto colon = text.find(':', at), end = text.find_first_of(",\n}", colon);
    text.replace(colon + 1, end - colon - 1, " " + value);
    std::ofstream(dir / "config.json") << text;
    fs::copy_file(kFixture + "/model.safetensors", dir / "model.safetensors", fs::copy_options::overwrite_existing);
}

}  // namespace

TEST_CASE("a sweep file with a 50,000-part table name is refused before the TOML parser sees it", "[spec][hostile]") {
    std::string name = "a";
    for (int i = 0; i < 50000; ++i) name += ".a";
    CHECK_THROWS_WITH(parse_sweep("[" + name + "]\n", "deep.toml"), Catch::Contains("more than 32 parts"));
    CHECK_THROWS_WITH(parse_sweep("x = " + std::string(5000, '[') + std::string(5000, ']') + "\n", "nest.toml"),
                      Catch::Contains("nest deeper than 32"));
    CHECK_THROWS_WITH(parse_sweep("name = \"" + std::string(20000, 'n') + "\"\n", "long.toml"),
                      Catch::Contains("longer than"));
    // Dots inside numbers, times, strings and comments are not key parts.
    std::string ok = std::string(kTiny) +
                     "# a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.a.b.c.d.e.f.g.h\n"
                     "[trial]\nlr = 0.5\nname_ignored_by_toml = "
                     "\"1.2.3.4.5.6.7.8.9.1.2.3.4.5.6.7.8.9.1.2.3.4.5.6.7.8.9.1.2.3.4.5.6\"\n";
    CHECK_THROWS_WITH(parse_sweep(ok, "ok.toml"), Catch::Contains("name_ignored_by_toml"));  // unknown key, not a bound
    auto out = run_tune("validate " + std::string(TUNE_SOURCE_DIR) + "/sweeps/demo.toml");
    CHECK(out.exit_code == 0);
}

TEST_CASE("devices, FIFOs and oversized files are refused as sweep files, configs and token files", "[spec][hostile]") {
    test::ScratchDir dir;
    auto zero = run_tune("validate /dev/zero");
    CHECK(zero.exit_code == 2);
    CHECK_THAT(zero.output, Catch::Contains("not a regular file"));
    const std::string fifo = dir.file("fifo.toml");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    auto hang = run_command("timeout 10 " + std::string(TUNE_BINARY) + " validate " + fifo + " 2>&1");
    CHECK(hang.exit_code == 2);
    CHECK_THAT(hang.output, Catch::Contains("not a regular file"));
    {
        std::ofstream big(dir.file("big.toml"));
        big << kTiny;
        for (int i = 0; i < 40000; ++i) big << "# padding padding padding padding\n";
    }
    auto big = run_tune("validate " + dir.file("big.toml"));
    CHECK(big.exit_code == 2);
    CHECK_THAT(big.output, Catch::Contains("more than"));

    std::ofstream(dir.file("hf.toml")) << "[model]\nhf_config = \"/dev/zero\"\n[space]\n";
    auto hf = run_tune("validate " + dir.file("hf.toml"));
    CHECK(hf.exit_code == 2);
    CHECK_THAT(hf.output, Catch::Contains("not a regular file"));

    for (const std::string& flag : std::vector<std::string>{"--tokens /dev/zero", "--tokens " + fifo, "--init /dev"}) {
        auto t =
            run_command("timeout 20 " + std::string(TUNE_BINARY) + " trial --threads 1 --steps 1 " + flag + " 2>&1");
        INFO(flag << ": " << t.output);
        CHECK(t.exit_code == 2);
    }
}

TEST_CASE("hostile config.json values exit 2 with the field named", "[trial][hostile]") {
    test::ScratchDir dir;
    const std::pair<const char*, const char*> cases[] = {
        {"rms_norm_eps", "\"small\""}, {"rms_norm_eps", "1e400"}, {"rms_norm_eps", "-1e-5"},
        {"rope_theta", "-10000.0"},    {"hidden_size", "-32"},    {"vocab_size", "0"},
        {"num_attention_heads", "3"},  {"model_type", "7"},
    };
    int i = 0;
    for (const auto& [field, value] : cases) {
        const fs::path model = fs::path(dir.file("m" + std::to_string(i++)));
        write_config(model, field, value);
        auto out = run_tune("trial --threads 1 --steps 1 --init " + model.string());
        INFO(field << " = " << value << ": " << out.output);
        CHECK(out.exit_code == 2);
        CHECK_THAT(out.output, Catch::Contains("config.json"));
    }
    fs::create_directories(dir.file("empty"));
    auto none = run_tune("trial --threads 1 --steps 1 --init " + dir.file("empty"));
    CHECK(none.exit_code == 2);
    CHECK_THAT(none.output, Catch::Contains("config.json") && Catch::Contains("cannot open"));
}

TEST_CASE("safetensors whose tensors overlap, or whose shapes overflow, are refused", "[trial][safetensors][hostile]") {
    test::ScratchDir dir;
    auto write = [&](const std::string& name, const std::string& header, std::size_t data) {
        const std::string path = dir.file(name);
        std::ofstream out(path, std::ios::binary);
        const std::uint64_t n = header.size();
        for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
        out << header << std::string(data, '\0');
        return path;
    };
    const auto overlap = write("o.safetensors",
                               R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                               R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                               24);
    CHECK_THROWS_WITH(train::SafetensorsFile::load(overlap), Catch::Contains("overlap"));
    const auto huge =
        write("h.safetensors", R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0);
    CHECK_THROWS_WITH(train::SafetensorsFile::load(huge), Catch::Contains("shape"));
    const auto negative = write("n.safetensors", R"({"a":{"dtype":"F32","shape":[-1,4],"data_offsets":[0,16]}})", 16);
    CHECK_THROWS_WITH(train::SafetensorsFile::load(negative), Catch::Contains("negative"));
}

TEST_CASE("control characters and escapes are escaped by validate, report --format text and export csv",
          "[report][hostile]") {
    CHECK(printable("a\x1b[31mred\x07\n") == "a\\x1b[31mred\\x07\\x0a");
    CHECK(printable("line\nnext", "\n") == "line\nnext");
    CHECK(printable("\xc2\x9b"
                    "2J") == "\\xc2\\x9b2J");
    CHECK(printable("caf\xc3\xa9") == "caf\xc3\xa9");

    test::ScratchDir dir;
    std::ofstream(dir.file("esc.toml")) << "name = \"evil\\u001b[2Jname\"\n" << kTiny;
    auto v = run_tune("validate " + dir.file("esc.toml"));
    CHECK(v.exit_code == 0);
    CHECK(v.output.find('\x1b') == std::string::npos);
    CHECK_THAT(v.output, Catch::Contains("evil\\x1b[2Jname"));

    const std::string db = dir.file("r.db");
    {
        Store store(db, Store::Mode::read_write);
        test::add_failed_trial(store, "ev\x1b]0;title\x07il", "boom \x1b[31mred\x1b[0m", "tail", 2);
    }
    for (const std::string& args : {"export --format csv --db " + db, "report --format text --db " + db}) {
        auto out = run_tune(args);
        INFO(args << ": " << out.output);
        CHECK(out.exit_code == 0);
        CHECK(out.output.find('\x1b') == std::string::npos);
        CHECK(out.output.find('\x07') == std::string::npos);
    }
}

TEST_CASE("report paths: only regular files are written, through an unpredictable temporary file",
          "[report][hostile]") {
    test::ScratchDir scratch;
    const fs::path dir = scratch.file("out");
    fs::create_directories(dir / "sub");
    const std::string page = "<html>report</html>";

    // A symlink planted at the old predictable temporary name is never followed.
    std::ofstream(dir / "victim") << "keep me";
    fs::create_symlink(dir / "victim", dir / "r.html.tmp");
    write_output_file(dir / "r.html", page, "the report");
    CHECK(run_command("cat '" + (dir / "victim").string() + "'").output == "keep me");
    CHECK(run_command("cat '" + (dir / "r.html").string() + "'").output == page);
    CHECK((fs::status(dir / "r.html").permissions() & fs::perms::others_read) != fs::perms::none);
    fs::remove(dir / "r.html.tmp");

    // A FIFO stands for /dev/null: the same refusal (not a regular file), but a tune without the
    // fix replaces a file in the scratch directory, not the machine's /dev/null.
    const fs::path fifo = scratch.file("fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    for (const fs::path& bad : {dir / "sub", fs::path((dir / "sub").string() + "/"), fs::path(""), fifo}) {
        INFO(bad.string());
        CHECK_THROWS_AS(write_output_file(bad, page, "the report"), OutputFileError);
        CHECK_THROWS_AS(check_output_path(bad, "the report"), OutputFileError);
    }
    CHECK_THROWS_AS(write_output_file(dir / "missing" / "r.html", page, "the report"), OutputFileError);
    CHECK(leftovers(dir) == 0);
    CHECK(fs::is_fifo(fifo));

    // Through the CLI: exit 2, nothing left behind.
    const std::string db = scratch.file("r.db");
    {
        Store store(db, Store::Mode::read_write);
        store.open_sweep(test::sample_sweep("s"), false);
    }
    for (const std::string& o :
         {(dir / "sub").string(), (dir / "sub").string() + "/", std::string("''"), fifo.string()}) {
        auto out = run_tune("report --db " + db + " -o " + o);
        INFO(o << ": " << out.output);
        CHECK(out.exit_code == 2);
    }
    CHECK(leftovers(dir) == 0);
    CHECK(leftovers(dir / "sub") == 0);
    CHECK(fs::is_fifo(fifo));
}

TEST_CASE("a sweep checks its report path before the first trial", "[driver][hostile]") {
    test::ScratchDir dir;
    fs::create_directories(dir.file("adir"));
    std::ofstream(dir.file("s.toml")) << kTiny << "[output]\nreport = \"" << dir.file("adir") << "\"\n";
    auto out = run_tune("sweep --no-probe --db " + dir.file("r.db") + " " + dir.file("s.toml"));
    INFO(out.output);
    CHECK(out.exit_code == 2);
    CHECK_THAT(out.output, Catch::Contains("directory"));
    CHECK(!fs::exists(dir.file("r.db")));  // refused before the database, let alone a trial
}

TEST_CASE("resources the launcher cannot start here are refused with the reason", "[driver][hostile]") {
    test::ScratchDir dir;
    std::ofstream(dir.file("s.toml"))
        << "[model]\npreset = \"tiny\"\n[hardware]\ngpus = 1024\nnodes = 4096\ndevice = \"cpu\"\n"
           "[space]\ncontext = [64]\n";
    auto v = run_tune("validate " + dir.file("s.toml"));
    CHECK_THAT(v.output, Catch::Contains("cannot start here"));
    auto out = run_tune("sweep --no-probe --no-report --db " + dir.file("r.db") + " " + dir.file("s.toml"));
    INFO(out.output);
    CHECK(out.exit_code == 2);
    CHECK_THAT(out.output, Catch::Contains("4096 nodes") || Catch::Contains("ranks"));
    std::ofstream(dir.file("one.toml")) << "[model]\npreset = \"tiny\"\n[hardware]\ngpus = 1024\ndevice = \"cpu\"\n"
                                           "[space]\ncontext = [64]\n";
    auto ranks = run_tune("sweep --no-probe --no-report --db " + dir.file("r1.db") + " " + dir.file("one.toml"));
    CHECK(ranks.exit_code == 2);
    CHECK_THAT(ranks.output, Catch::Contains("1024 ranks would run on this one host"));
}

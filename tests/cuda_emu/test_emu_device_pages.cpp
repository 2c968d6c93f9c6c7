// The CUDA backend's large buffers as driver pages (kernels/cuda/device_pages)
// kept by the trainer's page pool, on the emulated device, whose pages are
// TUNE_EMU_PAGE_BYTES (64 KiB) so the tiny model takes them too.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <vector>

#include "core/presets.h"
#include "kernels/cuda/cuda_backend.h"
#include "tests/gpu/device_pages_case.h"
#include "tests/support/trainer_fixture.h"
#include "train/comm/comm.h"
#include "train/io/data.h"
#include "train/memory/memory.h"
#include "train/trainer.h"

using namespace tune;
using train::Allocator;
using train::Buffer;

TEST_CASE(
    "emulated device: device pages are backed, moved with their contents and released, what the device cannot hold "
    "backs nothing") {
    const std::uint64_t total = tune_emu::device_memory_total();
    tune_emu::set_device_memory(tune_emu::device_memory_used() + (256ull << 20));  // the failing back() stays short
    tune::test::check_device_pages();
    tune_emu::set_device_memory(total);
}

namespace {

std::unique_ptr<kernels::Backend> backend_with_pages() {
    kernels::CudaBackendOptions options;
    options.device_pages = true;
    return kernels::make_cuda_backend(options);
}

}  // namespace

TEST_CASE("emulated device: large buffers are driver pages, moved with their contents, all handed back") {
    auto backend = backend_with_pages();
    REQUIRE(backend->page_mapper() != nullptr);
    const std::uint64_t page = tune_emu::device_page_bytes();
    const std::uint64_t before = tune_emu::device_pages_bytes();
    {
        Allocator memory(*backend, 0);
        CHECK(memory.min_page_buffer_bytes() == page);
        Buffer a = memory.allocate(Component::activations, 3 * page);
        Buffer b = memory.allocate(Component::activations, 2 * page - 100);  // rounded up to 2 pages
        Buffer small = memory.allocate(Component::activations, page - 1);    // from the stream-ordered pool
        CHECK(tune_emu::device_pages_bytes() - before == 5 * page);
        CHECK(memory.pages_in_use() == 5 * page);

        const std::vector<unsigned char> pattern(3 * page, 0x5a);
        backend->copy_to_device(a.get(), pattern.data(), pattern.size());
        a.reset();
        CHECK(memory.kept() == 3 * page);
        // No kept block fits 4 pages: a's 3 move into the new range, one page is fresh.
        Buffer c = memory.allocate(Component::activations, 4 * page);
        CHECK(tune_emu::device_pages_bytes() - before == 6 * page);
        CHECK(memory.mapped() == 6 * page);
        std::vector<unsigned char> moved(3 * page);
        backend->copy_to_host(moved.data(), c.get(), moved.size());
        CHECK(moved == pattern);
        // The old range went with its last page: it is no device memory any more.
        cudaPointerAttributes where;
        REQUIRE(cudaPointerGetAttributes(&where, pattern.data()) == cudaSuccess);
        CHECK(where.type != cudaMemoryTypeDevice);

        const auto stats = kernels::cuda_memory_stats(*backend);
        REQUIRE(stats.has_value());
        CHECK(stats->pages_bytes == 6 * page);
        CHECK(stats->pages_high_bytes == memory.pages_held_high());
        CHECK(memory.pages_held_high() == 6 * page);
    }
    // The allocator's pool handed every kept page back to the driver.
    CHECK(tune_emu::device_pages_bytes() == before);
    CHECK(backend->live_bytes() == 0);
}

TEST_CASE("emulated device: by default every buffer comes from the stream-ordered pool") {
    auto backend = kernels::make_cuda_backend(0);
    CHECK(backend->page_mapper() == nullptr);
    Allocator memory(*backend, 0);
    CHECK(memory.min_page_buffer_bytes() == 0);
    Buffer a = memory.allocate(Component::activations, 8 * tune_emu::device_page_bytes());
    CHECK(memory.pages_in_use() == 0);
    CHECK(backend->live_bytes() == 8 * tune_emu::device_page_bytes());
}

TEST_CASE("emulated device: a training step after the first maps no new device pages, they follow the tagged peak") {
    auto backend = backend_with_pages();
    TrialConfig c = test::trainer_config(find_model("tiny").value());
    c.context = 128;
    c.micro_batch = 2;  // (T, h) activations of 64 KiB: pages
    train::SingleRankComm comm;
    const auto tokens = train::synthetic_tokens(c.seed, c.model.vocab);
    const std::uint64_t before = tune_emu::device_pages_bytes();
    {
        train::Trainer trainer(*backend, comm, c, *tokens);
        const Allocator& memory = trainer.memory();
        trainer.step();
        const std::uint64_t first = memory.mapped();
        trainer.step();
        trainer.step();
        INFO("first step and setup mapped " << first << " bytes, peak " << memory.peak() << ", pages held at most "
                                            << memory.pages_held_high());
        CHECK(first > 0);
        CHECK(memory.mapped() == first);
        // The driver holds exactly the pool's pages: in use plus kept.
        CHECK(tune_emu::device_pages_bytes() - before == memory.pages_in_use() + memory.kept());
        const auto stats = kernels::cuda_memory_stats(*backend);
        REQUIRE(stats.has_value());
        CHECK(stats->pages_high_bytes == memory.pages_held_high());
        // What the device held for the pages follows the tagged peak: 71.89 MB for 71.60 MB (64 KiB pages).
        CHECK(static_cast<double>(memory.pages_held_high()) <= 1.01 * static_cast<double>(memory.peak()));
    }
    CHECK(tune_emu::device_pages_bytes() == before);
}

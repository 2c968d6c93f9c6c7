// Fiber stacks and the context switch.
#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define TUNE_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TUNE_EMU_ASAN 1
#endif
#endif

#if defined(TUNE_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__)
// tune_emu_switch(void** save_sp, void* load_sp): pushes the callee-saved
// registers, stores rsp in *save_sp, switches to load_sp and pops the
// registers saved there. A fresh stack is laid out by Fiber::prepare so the
// final ret enters tune_emu_trampoline with r12 = argument, r13 = function.
asm(R"(
    .text
    .globl tune_emu_switch
    .hidden tune_emu_switch
    .type tune_emu_switch, @function
tune_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size tune_emu_switch, .-tune_emu_switch

    .globl tune_emu_trampoline
    .hidden tune_emu_trampoline
    .type tune_emu_trampoline, @function
tune_emu_trampoline:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size tune_emu_trampoline, .-tune_emu_trampoline
)");

extern "C" void tune_emu_switch(void** save_sp, void* load_sp);
extern "C" void tune_emu_trampoline();
#endif

namespace tune_emu {

namespace {

std::size_t page_size() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace

// Entered on the fiber's own stack, once per (re)start.
static void fiber_entry(void* self_ptr) {
    auto* self = static_cast<Fiber*>(self_ptr);
    self->enter();
}

Fiber::Fiber(std::size_t stack_bytes, Loop loop, void* arg) : loop_(loop), arg_(arg) {
    const std::size_t page = page_size();
    stack_bytes_ = (stack_bytes + page - 1) / page * page;
    mapping_ =
        mmap(nullptr, stack_bytes_ + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mapping_ == MAP_FAILED) throw std::bad_alloc();
    mprotect(mapping_, page, PROT_NONE);  // guard page: stacks grow down into it
    stack_ = static_cast<char*>(mapping_) + page;
    prepare();
}

Fiber::~Fiber() { munmap(mapping_, stack_bytes_ + page_size()); }

void Fiber::prepare() {
#if defined(TUNE_EMU_ASAN)
    // Frames abandoned by reset() leave their redzones poisoned.
    __asan_unpoison_memory_region(stack_, stack_bytes_);
#endif
#if defined(__x86_64__)
    // Top of stack, 16-byte aligned; tune_emu_switch pops six registers and
    // returns into the trampoline with rsp 16-byte aligned, as a call expects.
    auto top = reinterpret_cast<std::uintptr_t>(stack_ + stack_bytes_) & ~std::uintptr_t{15};
    auto* sp = reinterpret_cast<void**>(top - 72);
    sp[0] = nullptr;                                        // r15
    sp[1] = nullptr;                                        // r14
    sp[2] = reinterpret_cast<void*>(&fiber_entry);          // r13: function
    sp[3] = this;                                           // r12: argument
    sp[4] = nullptr;                                        // rbx
    sp[5] = nullptr;                                        // rbp
    sp[6] = reinterpret_cast<void*>(&tune_emu_trampoline);  // return address
    fiber_sp_ = sp;
#else
    getcontext(&fiber_ctx_);
    fiber_ctx_.uc_stack.ss_sp = stack_;
    fiber_ctx_.uc_stack.ss_size = stack_bytes_;
    fiber_ctx_.uc_link = nullptr;
    makecontext(&fiber_ctx_, reinterpret_cast<void (*)()>(&fiber_entry), 1, this);
#endif
}

void Fiber::enter() {
#if defined(TUNE_EMU_ASAN)
    __sanitizer_finish_switch_fiber(nullptr, &caller_bottom_, &caller_size_);
#endif
    for (;;) loop_(arg_);  // by contract loop_ never returns; if it did, it would simply start over
}

void Fiber::resume() {
#if defined(TUNE_EMU_ASAN)
    void* caller_fake = nullptr;
    __sanitizer_start_switch_fiber(&caller_fake, stack_, stack_bytes_);
#endif
#if defined(__x86_64__)
    tune_emu_switch(&caller_sp_, fiber_sp_);
#else
    swapcontext(&caller_ctx_, &fiber_ctx_);
#endif
#if defined(TUNE_EMU_ASAN)
    __sanitizer_finish_switch_fiber(caller_fake, nullptr, nullptr);
#endif
}

void Fiber::suspend() {
#if defined(TUNE_EMU_ASAN)
    __sanitizer_start_switch_fiber(&fake_stack_, caller_bottom_, caller_size_);
#endif
#if defined(__x86_64__)
    tune_emu_switch(&fiber_sp_, caller_sp_);
#else
    swapcontext(&fiber_ctx_, &caller_ctx_);
#endif
#if defined(TUNE_EMU_ASAN)
    __sanitizer_finish_switch_fiber(fake_stack_, &caller_bottom_, &caller_size_);
#endif
}

void Fiber::reset() { prepare(); }

}  // namespace tune_emu

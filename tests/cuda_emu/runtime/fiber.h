// A minimal cooperative fiber: its own mmap'ed stack (a guard page below it,
// so an overflow faults instead of corrupting the next stack) and a
// hand-written x86-64 context switch that saves only the callee-saved
// registers. ucontext's swapcontext makes a sigprocmask system call on every
// switch, which is what made a first fiber shim take an hour for the
// training cases; this switch is a dozen instructions. Other architectures
// fall back to ucontext.
//
// A fiber runs `loop(arg)`, which must never return: it switches back to
// whoever resumed it instead. Under AddressSanitizer every switch is
// announced (__sanitizer_start/finish_switch_fiber) so ASan follows the
// stack in use.
#pragma once

#include <cstddef>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace tune_emu {

class Fiber {
public:
    using Loop = void (*)(void* arg);

    Fiber(std::size_t stack_bytes, Loop loop, void* arg);
    ~Fiber();
    Fiber(const Fiber&) = delete;
    Fiber& operator=(const Fiber&) = delete;

    // Runs the fiber from where it last switched out (its loop's start the
    // first time) until it calls suspend(); returns then.
    void resume();
    // Called on the fiber: back to the resume() that started it.
    void suspend();
    // Forgets the fiber's frames (a kernel thread abandoned mid-block): the
    // next resume() starts loop(arg) afresh on a clean stack.
    void reset();

    // The first code on the fiber's stack (called by the entry trampoline).
    void enter();

private:
    void prepare();

    std::size_t stack_bytes_;
    void* mapping_ = nullptr;  // guard page + stack
    char* stack_ = nullptr;    // lowest usable byte
    Loop loop_;
    void* arg_;
#if defined(__x86_64__)
    void* fiber_sp_ = nullptr;
    void* caller_sp_ = nullptr;
#else
    ucontext_t fiber_ctx_{};
    ucontext_t caller_ctx_{};
#endif
    // AddressSanitizer's bookkeeping of the stack being left.
    void* fake_stack_ = nullptr;
    const void* caller_bottom_ = nullptr;
    std::size_t caller_size_ = 0;
};

}  // namespace tune_emu

// Just enough of CUDA's device language to run pymagma's kernels on the CPU (pymagma.simulator).  The blocks of a
// launch run one after another (a schedule CUDA allows), so __shared__ arrays can simply be static.  Inside a block,
// programs with __syncthreads run each GPU thread as a fiber on the launching thread: a fiber runs until
// it reaches a barrier, and the block's fibers resume only once every fiber has reached it (or finished).  Programs
// without barriers (PM_NO_BARRIERS) run their threads one after another: any order is a valid schedule for them.
// One launch runs at a time (the launch dimensions and shared memory are process-wide).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>
#include <ucontext.h>

#define PM_HOST_EMULATION 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

using std::cos;
using std::erf;
using std::exp;
using std::expm1;
using std::log;
using std::log1p;
using std::pow;
using std::sin;
using std::sqrt;
using std::tanh;

struct pm_dim3 { unsigned x = 1, y = 1, z = 1; };
inline pm_dim3 threadIdx, blockIdx, blockDim, gridDim;

inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
inline long long __double_as_longlong(double d) { long long v; std::memcpy(&v, &d, 8); return v; }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }

// Fibers: start(c, stack, bytes, entry) prepares a context that runs entry() on its own stack; swap(save, load)
// saves the running context in save and resumes load.  On x86-64 a few instructions switch stacks (the callee-saved
// registers of the System V ABI, no system call); elsewhere ucontext's swapcontext does it.
#if defined(__x86_64__) && !defined(PM_UCONTEXT)
extern "C" void pm_switch_stack(void** save_sp, void* load_sp);
asm(R"(
    .text
    .p2align 4
    .globl pm_switch_stack
    .hidden pm_switch_stack
    .type pm_switch_stack, @function
pm_switch_stack:
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
    .size pm_switch_stack, .-pm_switch_stack
)");
struct pm_context { void* sp = nullptr; };
inline void pm_start(pm_context& c, char* stack, std::size_t bytes, void (*entry)()) {
    auto top = reinterpret_cast<std::uintptr_t>(stack + bytes) & ~std::uintptr_t(15);
    auto* frame = reinterpret_cast<void**>(top - 64);  // six saved registers, the return address, a dummy slot
    for (int i = 0; i < 6; ++i) frame[i] = nullptr;
    frame[6] = reinterpret_cast<void*>(entry);  // entry starts with rsp = top - 8, as after a call
    frame[7] = nullptr;
    c.sp = frame;
}
inline void pm_swap(pm_context& save, pm_context& load) { pm_switch_stack(&save.sp, load.sp); }
#else
struct pm_context { ucontext_t uc; };
inline void pm_start(pm_context& c, char* stack, std::size_t bytes, void (*entry)()) {
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack;
    c.uc.uc_stack.ss_size = bytes;
    c.uc.uc_link = nullptr;  // entry never returns
    makecontext(&c.uc, entry, 0);
}
inline void pm_swap(pm_context& save, pm_context& load) { swapcontext(&save.uc, &load.uc); }
#endif

// The fibers of the block being run.
struct pm_fibers {
    static constexpr std::size_t stack_bytes = 256 * 1024;
    pm_context scheduler;
    std::deque<pm_context> contexts;  // never relocated (a ucontext_t points into itself)
    std::vector<std::unique_ptr<char[]>> stacks;
    std::vector<char> done;
    unsigned current = 0;
    void (*body)(void**) = nullptr;
    void** args = nullptr;
};
inline pm_fibers pm_block;
inline std::mutex pm_launch_lock;

inline void __syncthreads() { pm_swap(pm_block.contexts[pm_block.current], pm_block.scheduler); }

[[noreturn]] inline void pm_fiber_main() {
    pm_block.body(pm_block.args);
    pm_block.done[pm_block.current] = 1;
    pm_swap(pm_block.contexts[pm_block.current], pm_block.scheduler);  // never resumed
    __builtin_unreachable();
}

// Call kernel k with its arguments read from args[i] (pointers to each argument, as cuLaunchKernel takes them).
template <typename... A, std::size_t... I>
void pm_call(void (*k)(A...), void** args, std::index_sequence<I...>) {
    k(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(args[I])...);
}
template <typename... A> void pm_call(void (*k)(A...), void** args) {
    pm_call(k, args, std::index_sequence_for<A...>{});
}

// Run body(args) as a <<<grid, block>>> launch; the blocks run one after another in the order ``order`` gives
// (a permutation of 0..grid-1; nullptr: ascending), as CUDA promises no order between blocks.
inline void pm_run(void (*body)(void**), void** args, unsigned grid, unsigned block, const unsigned* order) {
    std::lock_guard<std::mutex> lock(pm_launch_lock);
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
#ifdef PM_NO_BARRIERS
    for (unsigned i = 0; i < grid; ++i)
        for (unsigned t = 0; t < block; ++t) {
            blockIdx = {order ? order[i] : i, 0, 0};
            threadIdx = {t, 0, 0};
            body(args);
        }
#else
    pm_fibers& f = pm_block;
    while (f.stacks.size() < block) {
        f.stacks.emplace_back(new char[pm_fibers::stack_bytes]);
        f.contexts.emplace_back();
    }
    f.done.assign(block, 0);
    f.body = body;
    f.args = args;
    for (unsigned i = 0; i < grid; ++i) {
        blockIdx = {order ? order[i] : i, 0, 0};
        for (unsigned t = 0; t < block; ++t) {
            pm_start(f.contexts[t], f.stacks[t].get(), pm_fibers::stack_bytes, pm_fiber_main);
            f.done[t] = 0;
        }
        for (unsigned live = block; live > 0;)  // one round: every live fiber runs to its next barrier or its end
            for (unsigned t = 0; t < block; ++t) {
                if (f.done[t]) continue;
                f.current = t;
                threadIdx = {t, 0, 0};
                pm_swap(f.scheduler, f.contexts[t]);
                if (f.done[t]) --live;
            }
    }
#endif
}

// Just enough of CUDA's device language to run pymagma's kernels on the CPU (pymagma.simulator): every thread of
// a block is a std::thread, __syncthreads() is a std::barrier, and the blocks of a launch run one after another
// (a schedule CUDA allows), so __shared__ arrays can simply be static.
#pragma once
#include <barrier>
#include <cmath>
#include <cstring>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#define PM_HOST_EMULATION 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

using std::cos;
using std::exp;
using std::log;
using std::pow;
using std::sin;
using std::sqrt;
using std::tanh;

struct pm_dim3 { unsigned x = 1, y = 1, z = 1; };
inline thread_local pm_dim3 threadIdx, blockIdx;
inline pm_dim3 blockDim, gridDim;
inline thread_local std::barrier<>* pm_block_barrier = nullptr;

inline void __syncthreads() { pm_block_barrier->arrive_and_wait(); }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }

// Call kernel k with its arguments read from args[i] (pointers to each argument, as cuLaunchKernel takes them).
template <typename... A, std::size_t... I>
void pm_call(void (*k)(A...), void** args, std::index_sequence<I...>) {
    k(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(args[I])...);
}
template <typename... A> void pm_call(void (*k)(A...), void** args) {
    pm_call(k, args, std::index_sequence_for<A...>{});
}

// Run body(args) as a <<<grid, block>>> launch.  Programs without __syncthreads (PM_NO_BARRIERS) run their
// threads one after another on this thread: without barriers or shared memory, any order is a valid schedule.
inline void pm_run(void (*body)(void**), void** args, unsigned grid, unsigned block) {
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
#ifdef PM_NO_BARRIERS
    for (unsigned b = 0; b < grid; ++b)
        for (unsigned t = 0; t < block; ++t) {
            blockIdx = {b, 0, 0};
            threadIdx = {t, 0, 0};
            body(args);
        }
    return;
#endif
    std::barrier<> sync(block);
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; ++t)
        threads.emplace_back([&sync, body, args, grid, t] {
            threadIdx = {t, 0, 0};
            pm_block_barrier = &sync;
            for (unsigned b = 0; b < grid; ++b) {
                blockIdx = {b, 0, 0};
                body(args);
                sync.arrive_and_wait();  // the block is done before the next one reuses __shared__ memory
            }
        });
    for (auto& thread : threads) thread.join();
}

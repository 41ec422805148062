// Counter-based random numbers: Philox4x32-10 keyed by the 64-bit seed, counter (pair index j, 64-bit offset).
// Each counter gives four 32-bit words -> two 53-bit uniforms in (0, 1] -> outputs 2j and 2j+1; normals use
// Box-Muller on the same two uniforms.  The stream is therefore identical for every dtype and launch shape.
#include "common.cuh"

__device__ __forceinline__ void pm_philox(u32 c[4], u32 k0, u32 k1) {
    for (int round = 0; round < 10; ++round) {
        u32 hi0 = __umulhi(0xD2511F53u, c[0]), lo0 = 0xD2511F53u * c[0];
        u32 hi1 = __umulhi(0xCD9E8D57u, c[2]), lo1 = 0xCD9E8D57u * c[2];
        u32 n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
        c[0] = n0; c[1] = lo1; c[2] = n2; c[3] = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
}

// A double in (0, 1] from two words: 53 random bits offset by half a step (the top value rounds up to 1.0, with
// probability 2^-53); narrower output types can round to either end.
__device__ __forceinline__ double pm_unit(u32 hi, u32 lo) {
    u64 bits = ((u64)(hi >> 5) << 26) | (u64)(lo >> 6);
    return ((double)bits + 0.5) * (1.0 / 9007199254740992.0);
}

__device__ __forceinline__ void pm_pair(u64 seed, u64 offset, u64 j, double& u0, double& u1) {
    u32 c[4] = {(u32)j, (u32)(j >> 32), (u32)offset, (u32)(offset >> 32)};
    pm_philox(c, (u32)seed, (u32)(seed >> 32));
    u0 = pm_unit(c[0], c[1]);
    u1 = pm_unit(c[2], c[3]);
}

template <typename T>
__global__ void uniform(T* __restrict__ y, i64 n, u64 seed, u64 offset, double low, double high) {
    typedef typename Traits<T>::acc A;
    for (i64 j = pm_global_index(); 2 * j < n; j += pm_grid_stride()) {
        double u0, u1;
        pm_pair(seed, offset, (u64)j, u0, u1);
        y[2 * j] = Traits<T>::store((A)(low + (high - low) * u0));
        if (2 * j + 1 < n) y[2 * j + 1] = Traits<T>::store((A)(low + (high - low) * u1));
    }
}

template <typename T>
__global__ void normal(T* __restrict__ y, i64 n, u64 seed, u64 offset, double mean, double stddev) {
    typedef typename Traits<T>::acc A;
    const double two_pi = 6.283185307179586;
    for (i64 j = pm_global_index(); 2 * j < n; j += pm_grid_stride()) {
        double u0, u1;
        pm_pair(seed, offset, (u64)j, u0, u1);
        double radius = sqrt(-2.0 * log(u0));
        y[2 * j] = Traits<T>::store((A)(mean + stddev * radius * cos(two_pi * u1)));
        if (2 * j + 1 < n) y[2 * j + 1] = Traits<T>::store((A)(mean + stddev * radius * sin(two_pi * u1)));
    }
}

// Inverted dropout on the uniform stream of (seed, offset): u rounded to T, keep = u >= rate (in T),
// mask = keep * (1 / (1 - rate)) in T, y = x * mask.  The host can reproduce it exactly from the same stream.
// The grid-stride loop of dropout, shared with step.cu's dropout_at.
template <typename T>
__device__ __forceinline__ void dropout_elements(const T* x, T* y, T* mask, i64 n, u64 seed, u64 offset,
                                                 double rate) {
    typedef typename Traits<T>::acc A;
    const A threshold = Traits<T>::load(Traits<T>::store((A)rate));
    const A scale = Traits<T>::load(Traits<T>::store((A)(1.0 / (1.0 - rate))));
    for (i64 j = pm_global_index(); 2 * j < n; j += pm_grid_stride()) {
        double u[2];
        pm_pair(seed, offset, (u64)j, u[0], u[1]);
        for (int k = 0; k < 2 && 2 * j + k < n; ++k) {
            i64 i = 2 * j + k;
            A m = Traits<T>::load(Traits<T>::store((A)u[k])) >= threshold ? scale : A(0);
            mask[i] = Traits<T>::store(m);
            y[i] = Traits<T>::store(Traits<T>::load(x[i]) * m);
        }
    }
}

template <typename T>
__global__ void dropout(const T* __restrict__ x, T* __restrict__ y, T* __restrict__ mask, i64 n, u64 seed,
                        u64 offset, double rate) {
    dropout_elements(x, y, mask, n, seed, offset, rate);
}

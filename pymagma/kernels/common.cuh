// Shared definitions of pymagma's kernels: storage types, load/store through an accumulation type, indexing.
// Self-contained (no CUDA headers) so NVRTC needs no include path: half and bfloat16 are converted by hand.
#pragma once

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;

#define PM_MAX_DIMS 8

struct half_t { unsigned short bits; };
struct bf16_t { unsigned short bits; };

#ifdef PM_HOST_EMULATION  // the tests run these kernels on the CPU: the host compiler's _Float16, same rounding
__device__ __forceinline__ float pm_half_to_float(unsigned short h) {
    _Float16 v;
    __builtin_memcpy(&v, &h, 2);
    return (float)v;
}
__device__ __forceinline__ unsigned short pm_float_to_half(float f) {
    _Float16 v = (_Float16)f;
    unsigned short h;
    __builtin_memcpy(&h, &v, 2);
    return h;
}
#else
__device__ __forceinline__ float pm_half_to_float(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ unsigned short pm_float_to_half(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
#endif
__device__ __forceinline__ float pm_bf16_to_float(unsigned short b) { return __uint_as_float(((u32)b) << 16); }
__device__ __forceinline__ unsigned short pm_float_to_bf16(float f) {
    u32 u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)0x7fc0;  // NaN stays a quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);                                    // round to nearest, ties to even
    return (unsigned short)(u >> 16);
}

__device__ __forceinline__ double pm_inf() { return __longlong_as_double(0x7ff0000000000000LL); }

// Traits<T>: the type arithmetic is done in (acc) and the conversions to and from storage.
template <typename T> struct Traits;
template <> struct Traits<float> {
    typedef float acc;
    static __device__ __forceinline__ float load(float v) { return v; }
    static __device__ __forceinline__ float store(float a) { return a; }
};
template <> struct Traits<double> {
    typedef double acc;
    static __device__ __forceinline__ double load(double v) { return v; }
    static __device__ __forceinline__ double store(double a) { return a; }
};
template <> struct Traits<half_t> {
    typedef float acc;
    static __device__ __forceinline__ float load(half_t v) { return pm_half_to_float(v.bits); }
    static __device__ __forceinline__ half_t store(float a) { half_t h; h.bits = pm_float_to_half(a); return h; }
};
template <> struct Traits<bf16_t> {
    typedef float acc;
    static __device__ __forceinline__ float load(bf16_t v) { return pm_bf16_to_float(v.bits); }
    static __device__ __forceinline__ bf16_t store(float a) { bf16_t b; b.bits = pm_float_to_bf16(a); return b; }
};
template <> struct Traits<int> {
    typedef double acc;
    static __device__ __forceinline__ double load(int v) { return (double)v; }
    static __device__ __forceinline__ int store(double a) { return (int)a; }
};
template <> struct Traits<i64> {
    typedef double acc;
    static __device__ __forceinline__ double load(i64 v) { return (double)v; }
    static __device__ __forceinline__ i64 store(double a) { return (i64)a; }
};
template <> struct Traits<unsigned char> {
    typedef float acc;
    static __device__ __forceinline__ float load(unsigned char v) { return (float)v; }
    static __device__ __forceinline__ unsigned char store(float a) { return (unsigned char)a; }
};

// Convert<S, D>::run(v): float conversions go through the arithmetic type; integer to integer converts directly
// (exact for int64 beyond 2^53, wrapping on narrowing like NumPy's astype).
template <typename T> struct IsInt { static const bool value = false; };
template <> struct IsInt<int> { static const bool value = true; };
template <> struct IsInt<i64> { static const bool value = true; };
template <> struct IsInt<unsigned char> { static const bool value = true; };
template <typename S, typename D, bool Ints = IsInt<S>::value && IsInt<D>::value> struct Convert {
    static __device__ __forceinline__ D run(S v) { return Traits<D>::store((typename Traits<D>::acc)Traits<S>::load(v)); }
};
template <typename S, typename D> struct Convert<S, D, true> {
    static __device__ __forceinline__ D run(S v) { return (D)v; }
};

// Shape and up to three stride sets (in elements) of a strided / broadcast operation; stride 0 broadcasts.
struct Strides3 {
    int ndim;
    i64 shape[PM_MAX_DIMS];
    i64 s0[PM_MAX_DIMS];
    i64 s1[PM_MAX_DIMS];
    i64 s2[PM_MAX_DIMS];
};

__device__ __forceinline__ i64 pm_global_index() { return (i64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ i64 pm_grid_stride() { return (i64)gridDim.x * blockDim.x; }

// Offsets of the flat (row-major) index i in the three stride sets of s.
__device__ __forceinline__ void pm_offsets(const Strides3& s, i64 i, i64& o0, i64& o1, i64& o2) {
    o0 = o1 = o2 = 0;
    for (int d = s.ndim - 1; d >= 0; --d) {
        i64 q = i / s.shape[d];
        i64 r = i - q * s.shape[d];
        o0 += r * s.s0[d];
        o1 += r * s.s1[d];
        o2 += r * s.s2[d];
        i = q;
    }
}

// A block-wide sum (or max, with take_max) of one value per thread through `shared` (blockDim.x entries, a power
// of two); every thread gets the result.  The tree's order is fixed, so the result is the same on every run.
template <typename A> __device__ A pm_block_reduce(A v, bool take_max, A* shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) {
            A o = shared[threadIdx.x + w];
            shared[threadIdx.x] = take_max ? (o > shared[threadIdx.x] ? o : shared[threadIdx.x]) : shared[threadIdx.x] + o;
        }
        __syncthreads();
    }
    A result = shared[0];
    __syncthreads();
    return result;
}

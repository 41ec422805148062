// Reductions over any set of axes and arg-max/arg-min along one axis: one block per output element.
// s.shape/s.s0 describe the kept axes (s.s1: output strides); r.shape/r.s0 the reduced axes of the input.
#include "common.cuh"

#define PM_REDUCE_THREADS 256

// Reduce op codes (keep in sync with pymagma.kernels.REDUCE_OPS): 0 sum, 1 mean, 2 max, 3 min, 4 prod, 5 sum of
// squares.
template <typename A> __device__ __forceinline__ A reduce_init(int op) {
    switch (op) {
        case 2: return -(A)pm_inf();
        case 3: return (A)pm_inf();
        case 4: return A(1);
        default: return A(0);
    }
}
template <typename A> __device__ __forceinline__ A reduce_step(int op, A acc, A v) {
    switch (op) {
        case 2: return v > acc || v != v ? v : acc;
        case 3: return v < acc || v != v ? v : acc;
        case 4: return acc * v;
        case 5: return acc + v * v;
        default: return acc + v;
    }
}
template <typename A> __device__ __forceinline__ A reduce_merge(int op, A a, A b) {
    switch (op) {
        case 2: return b > a || b != b ? b : a;
        case 3: return b < a || b != b ? b : a;
        case 4: return a * b;
        default: return a + b;
    }
}

template <typename T>
__global__ void reduce_axes(int op, const T* __restrict__ x, T* __restrict__ y, i64 n_out, i64 n_red, Strides3 s,
                            Strides3 r) {
    typedef typename Traits<T>::acc A;
    __shared__ A part[PM_REDUCE_THREADS];
    for (i64 out = blockIdx.x; out < n_out; out += gridDim.x) {
        i64 base, oy, unused;
        pm_offsets(s, out, base, oy, unused);
        A acc = reduce_init<A>(op);
        for (i64 j = threadIdx.x; j < n_red; j += blockDim.x) {
            i64 off, u1, u2;
            pm_offsets(r, j, off, u1, u2);
            acc = reduce_step<A>(op, acc, Traits<T>::load(x[base + off]));
        }
        part[threadIdx.x] = acc;
        __syncthreads();
        for (int w = blockDim.x / 2; w > 0; w >>= 1) {
            if (threadIdx.x < w) part[threadIdx.x] = reduce_merge<A>(op, part[threadIdx.x], part[threadIdx.x + w]);
            __syncthreads();
        }
        if (threadIdx.x == 0) y[oy] = Traits<T>::store(op == 1 ? part[0] / (A)n_red : part[0]);
        __syncthreads();
    }
}

// Index (along one axis of length n_red and stride red_stride) of the largest (want_max) or smallest element;
// the first one on ties, NaN wins like NumPy.
template <typename T>
__global__ void arg_reduce(int want_max, const T* __restrict__ x, i64* __restrict__ y, i64 n_out, i64 n_red,
                           i64 red_stride, Strides3 s) {
    typedef typename Traits<T>::acc A;
    __shared__ A best[PM_REDUCE_THREADS];
    __shared__ i64 where[PM_REDUCE_THREADS];
    for (i64 out = blockIdx.x; out < n_out; out += gridDim.x) {
        i64 base, oy, unused;
        pm_offsets(s, out, base, oy, unused);
        A b = want_max ? -(A)pm_inf() : (A)pm_inf();
        i64 bi = n_red;
        for (i64 j = threadIdx.x; j < n_red; j += blockDim.x) {
            A v = Traits<T>::load(x[base + j * red_stride]);
            bool better = (bi == n_red) || (v != v && b == b) || (want_max ? v > b : v < b);
            if (better && !(b != b && bi != n_red)) { b = v; bi = j; }
        }
        best[threadIdx.x] = b;
        where[threadIdx.x] = bi;
        __syncthreads();
        for (int w = blockDim.x / 2; w > 0; w >>= 1) {
            if (threadIdx.x < w) {
                A v = best[threadIdx.x + w], c = best[threadIdx.x];
                i64 vi = where[threadIdx.x + w], ci = where[threadIdx.x];
                bool take;
                if (vi == n_red) take = false;
                else if (ci == n_red) take = true;
                else if (c != c) take = (v != v) && vi < ci;
                else if (v != v) take = true;
                else take = want_max ? (v > c || (v == c && vi < ci)) : (v < c || (v == c && vi < ci));
                if (take) { best[threadIdx.x] = v; where[threadIdx.x] = vi; }
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) y[oy] = where[0];
        __syncthreads();
    }
}

// Inverted dropout on the uniform stream of (seed, offset) of pymagma's Philox generator (philox.cuh, the stream of
// pymagma.kernels.uniform): u rounded to T, keep = u >= rate (in T),
// mask = keep * (1 / (1 - rate)) in T, y = x * mask.  The host can reproduce it exactly from the same stream.
// The grid-stride loop of dropout, shared with step.cu's dropout_at.
#include "philox.cuh"

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

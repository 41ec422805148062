// Embedding lookup and its gradient.  The lookup never reads outside the table: an index outside [0, rows) gives a
// row of NaN (so a loss computed from it is NaN and the training step refuses the update).  The gradient is a
// deterministic scatter-add: one block per table row, each thread one feature, summing the matching rows of dy in the
// order of the indices (no atomics, the same bits on every run).
#include "common.cuh"

// out[i, j] = table[indices[i], j] for i < n, j < dim.
template <typename T>
__global__ void embedding_gather(const T* __restrict__ table, const i64* __restrict__ indices, T* __restrict__ out,
                                 i64 n, i64 rows, i64 dim) {
    typedef typename Traits<T>::acc A;
    for (i64 e = pm_global_index(); e < n * dim; e += pm_grid_stride()) {
        i64 i = e / dim;
        i64 k = indices[i];
        out[e] = (k >= 0 && k < rows) ? table[k * dim + (e - i * dim)]
                                      : Traits<T>::store((A)__longlong_as_double(0x7ff8000000000000LL));
    }
}

// dtable[r, j] = sum over i (in order) with indices[i] == r of dy[i, j]; indices outside the table add nothing.
template <typename T>
__global__ void embedding_scatter_add(const T* __restrict__ dy, const i64* __restrict__ indices,
                                      T* __restrict__ dtable, i64 n, i64 rows, i64 dim) {
    typedef typename Traits<T>::acc A;
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        for (i64 j = threadIdx.x; j < dim; j += blockDim.x) {
            A acc = A(0);
            for (i64 i = 0; i < n; ++i)
                if (indices[i] == r) acc += Traits<T>::load(dy[i * dim + j]);
            dtable[r * dim + j] = Traits<T>::store(acc);
        }
    }
}

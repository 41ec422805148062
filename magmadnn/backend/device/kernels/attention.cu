// The masked softmax of attention, fused: scores (batch, heads, tq, tk) -> probabilities over the last axis of
// scale * scores, with a causal mask (key j > query i is masked) and a key mask (batch, tk) (0 = padding), one block
// per row.  A row with no key left is all zeros.  The backward turns the saved probabilities into dscores.
#include "common.cuh"

#define PM_ATTN_THREADS 256

// rows = batch * heads * tq; row r belongs to batch r / per_batch (per_batch = heads * tq) and query r % tq.
template <typename T>
__global__ void masked_softmax(const T* __restrict__ x, const T* __restrict__ mask, T* __restrict__ y, i64 rows,
                               i64 tq, i64 tk, i64 per_batch, double scale, int causal) {
    typedef typename Traits<T>::acc A;
    __shared__ A shared[PM_ATTN_THREADS];
    const A s = (A)scale;
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* row = x + r * tk;
        const T* keys = mask ? mask + (r / per_batch) * tk : 0;
        i64 limit = causal ? (r % tq) + 1 : tk;
        if (limit > tk) limit = tk;
        A m = -(A)pm_inf();
        for (i64 j = threadIdx.x; j < limit; j += blockDim.x) {
            if (keys && Traits<T>::load(keys[j]) == A(0)) continue;
            A v = Traits<T>::load(row[j]) * s;
            m = v > m ? v : m;
        }
        m = pm_block_reduce<A>(m, true, shared);
        A part = A(0);
        if (m != -(A)pm_inf()) {
            for (i64 j = threadIdx.x; j < limit; j += blockDim.x) {
                if (keys && Traits<T>::load(keys[j]) == A(0)) continue;
                part += exp(Traits<T>::load(row[j]) * s - m);
            }
        }
        A total = pm_block_reduce<A>(part, false, shared);
        for (i64 j = threadIdx.x; j < tk; j += blockDim.x) {
            bool kept = j < limit && !(keys && Traits<T>::load(keys[j]) == A(0)) && total > A(0);
            y[r * tk + j] = Traits<T>::store(kept ? exp(Traits<T>::load(row[j]) * s - m) / total : A(0));
        }
    }
}

// dx = scale * y * (dy - sum(dy * y)) per row: masked entries have y = 0 and get 0.
template <typename T>
__global__ void masked_softmax_backward(const T* __restrict__ dy, const T* __restrict__ y, T* __restrict__ dx,
                                        i64 rows, i64 tk, double scale) {
    typedef typename Traits<T>::acc A;
    __shared__ A shared[PM_ATTN_THREADS];
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        A part = A(0);
        for (i64 j = threadIdx.x; j < tk; j += blockDim.x)
            part += Traits<T>::load(dy[r * tk + j]) * Traits<T>::load(y[r * tk + j]);
        A dot = pm_block_reduce<A>(part, false, shared);
        for (i64 j = threadIdx.x; j < tk; j += blockDim.x) {
            A p = Traits<T>::load(y[r * tk + j]);
            dx[r * tk + j] = Traits<T>::store((A)scale * p * (Traits<T>::load(dy[r * tk + j]) - dot));
        }
    }
}

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

// ------------------------------------------------------------------------------ attention over interleaved heads
// Scaled dot-product attention on the projections' own layout, the heads interleaved on the last axis: q (B, Tq,
// H*dk), k (B, Tk, H*dk), v (B, Tk, H*dv) -> o (B, Tq, H*dv), so that no head is split off or merged back by a
// copy.  The same arithmetic as matmul_nt + masked_softmax + matmul (each score and probability rounded to T as
// those store them, sums in the accumulation type); p (B, H, Tq, Tk) keeps the probabilities for the backward.
struct AttentionShape {
    i64 batch, heads, tq, tk, dk, dv;
};

// One block per (b, h, i) query row: the scores (into p's row), the masked softmax, then o's row.
template <typename T>
__global__ void attention_heads_forward(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                        const T* __restrict__ mask, T* __restrict__ o, T* __restrict__ p,
                                        AttentionShape d, double scale, int causal) {
    typedef typename Traits<T>::acc A;
    __shared__ A shared[PM_ATTN_THREADS];
    const A s = (A)scale;
    const i64 rows = d.batch * d.heads * d.tq;
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const i64 i = r % d.tq, h = (r / d.tq) % d.heads, b = r / (d.tq * d.heads);
        const T* qi = q + ((b * d.tq + i) * d.heads + h) * d.dk;
        const T* keys = mask ? mask + b * d.tk : 0;
        T* pr = p + r * d.tk;
        i64 limit = causal ? i + 1 : d.tk;
        if (limit > d.tk) limit = d.tk;
        A m = -(A)pm_inf();
        for (i64 j = threadIdx.x; j < d.tk; j += blockDim.x) {
            const T* kj = k + ((b * d.tk + j) * d.heads + h) * d.dk;
            A dot = A(0);
            for (i64 c = 0; c < d.dk; ++c) dot += Traits<T>::load(qi[c]) * Traits<T>::load(kj[c]);
            pr[j] = Traits<T>::store(dot);
            if (j >= limit || (keys && Traits<T>::load(keys[j]) == A(0))) continue;
            A x = Traits<T>::load(pr[j]) * s;
            m = x > m ? x : m;
        }
        m = pm_block_reduce<A>(m, true, shared);
        A part = A(0);
        if (m != -(A)pm_inf()) {
            for (i64 j = threadIdx.x; j < limit; j += blockDim.x) {
                if (keys && Traits<T>::load(keys[j]) == A(0)) continue;
                part += exp(Traits<T>::load(pr[j]) * s - m);
            }
        }
        const A total = pm_block_reduce<A>(part, false, shared);  // (its barriers order the scores' writes)
        for (i64 j = threadIdx.x; j < d.tk; j += blockDim.x) {
            bool kept = j < limit && !(keys && Traits<T>::load(keys[j]) == A(0)) && total > A(0);
            pr[j] = Traits<T>::store(kept ? exp(Traits<T>::load(pr[j]) * s - m) / total : A(0));
        }
        __syncthreads();
        T* oi = o + ((b * d.tq + i) * d.heads + h) * d.dv;
        for (i64 c = threadIdx.x; c < d.dv; c += blockDim.x) {
            A acc = A(0);
            for (i64 j = 0; j < d.tk; ++j)
                acc += Traits<T>::load(pr[j]) * Traits<T>::load(v[((b * d.tk + j) * d.heads + h) * d.dv + c]);
            oi[c] = Traits<T>::store(acc);
        }
        __syncthreads();
    }
}

// Backward, first pass, one block per (b, h, i) query row: dP[j] = do_i . v_j (rounded to T), ds = scale * p * (dP
// - sum(dP * p)) into the workspace, and dq_i = sum_j ds[j] k_j.
template <typename T>
__global__ void attention_heads_backward_rows(const T* __restrict__ dout, const T* __restrict__ k,
                                              const T* __restrict__ v, const T* __restrict__ p, T* __restrict__ ds,
                                              T* __restrict__ dq, AttentionShape d, double scale) {
    typedef typename Traits<T>::acc A;
    __shared__ A shared[PM_ATTN_THREADS];
    const i64 rows = d.batch * d.heads * d.tq;
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const i64 i = r % d.tq, h = (r / d.tq) % d.heads, b = r / (d.tq * d.heads);
        const T* doi = dout + ((b * d.tq + i) * d.heads + h) * d.dv;
        const T* pr = p + r * d.tk;
        T* dsr = ds + r * d.tk;
        A part = A(0);
        for (i64 j = threadIdx.x; j < d.tk; j += blockDim.x) {
            const T* vj = v + ((b * d.tk + j) * d.heads + h) * d.dv;
            A dot = A(0);
            for (i64 c = 0; c < d.dv; ++c) dot += Traits<T>::load(doi[c]) * Traits<T>::load(vj[c]);
            dsr[j] = Traits<T>::store(dot);
            part += Traits<T>::load(dsr[j]) * Traits<T>::load(pr[j]);
        }
        const A total = pm_block_reduce<A>(part, false, shared);
        for (i64 j = threadIdx.x; j < d.tk; j += blockDim.x)
            dsr[j] = Traits<T>::store((A)scale * Traits<T>::load(pr[j]) * (Traits<T>::load(dsr[j]) - total));
        __syncthreads();
        T* dqi = dq + ((b * d.tq + i) * d.heads + h) * d.dk;
        for (i64 c = threadIdx.x; c < d.dk; c += blockDim.x) {
            A acc = A(0);
            for (i64 j = 0; j < d.tk; ++j)
                acc += Traits<T>::load(dsr[j]) * Traits<T>::load(k[((b * d.tk + j) * d.heads + h) * d.dk + c]);
            dqi[c] = Traits<T>::store(acc);
        }
        __syncthreads();
    }
}

// Backward, second pass, one block per (b, h, j) key: dv_j = sum_i p[i, j] do_i and dk_j = sum_i ds[i, j] q_i.
template <typename T>
__global__ void attention_heads_backward_keys(const T* __restrict__ dout, const T* __restrict__ q,
                                              const T* __restrict__ p, const T* __restrict__ ds,
                                              T* __restrict__ dk, T* __restrict__ dv, AttentionShape d) {
    typedef typename Traits<T>::acc A;
    const i64 keys = d.batch * d.heads * d.tk;
    for (i64 r = blockIdx.x; r < keys; r += gridDim.x) {
        const i64 j = r % d.tk, h = (r / d.tk) % d.heads, b = r / (d.tk * d.heads);
        const i64 base = (b * d.heads + h) * d.tq * d.tk + j;  // p[b, h, i, j] = p[base + i * tk]
        for (i64 c = threadIdx.x; c < d.dv; c += blockDim.x) {
            A acc = A(0);
            for (i64 i = 0; i < d.tq; ++i)
                acc += Traits<T>::load(p[base + i * d.tk]) * Traits<T>::load(dout[((b * d.tq + i) * d.heads + h) * d.dv + c]);
            dv[((b * d.tk + j) * d.heads + h) * d.dv + c] = Traits<T>::store(acc);
        }
        for (i64 c = threadIdx.x; c < d.dk; c += blockDim.x) {
            A acc = A(0);
            for (i64 i = 0; i < d.tq; ++i)
                acc += Traits<T>::load(ds[base + i * d.tk]) * Traits<T>::load(q[((b * d.tq + i) * d.heads + h) * d.dk + c]);
            dk[((b * d.tk + j) * d.heads + h) * d.dk + c] = Traits<T>::store(acc);
        }
    }
}

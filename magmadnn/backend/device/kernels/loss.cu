// Fused softmax + cross-entropy over the last axis of (rows, classes) logits: per-row loss and the gradient
// (softmax - target) * grad_scale (or, with probs_only, the softmax itself), one block per row.  Targets are class
// indices or per-class probabilities.  The *_backward kernels turn saved probabilities and a per-row upstream
// gradient into dlogits.
#include "common.cuh"

#define PM_LOSS_THREADS 256

// Row statistics: max and log(sum(exp(x - max))).
template <typename T, typename A>
__device__ void pm_row_logsumexp(const T* row, i64 classes, A* shared, A& mx, A& lse) {
    A m = -(A)pm_inf();
    for (i64 j = threadIdx.x; j < classes; j += blockDim.x) {
        A v = Traits<T>::load(row[j]);
        m = v > m ? v : m;
    }
    mx = pm_block_reduce<A>(m, true, shared);
    A s = A(0);
    for (i64 j = threadIdx.x; j < classes; j += blockDim.x) s += exp(Traits<T>::load(row[j]) - mx);
    lse = log(pm_block_reduce<A>(s, false, shared));
}

// The same statistics of one row by one thread (the single-block kernels below, each thread taking whole rows).
template <typename T, typename A>
__device__ void pm_thread_row_logsumexp(const T* row, i64 classes, A& mx, A& lse) {
    mx = -(A)pm_inf();
    for (i64 j = 0; j < classes; ++j) {
        A v = Traits<T>::load(row[j]);
        mx = v > mx ? v : mx;
    }
    A s = A(0);
    for (i64 j = 0; j < classes; ++j) s += exp(Traits<T>::load(row[j]) - mx);
    lse = log(s);
}

template <typename T>
__global__ void softmax_xent_index(const T* __restrict__ logits, const i64* __restrict__ labels, T* __restrict__ loss,
                                   T* __restrict__ grad, i64 rows, i64 classes, double grad_scale,
                                   int probs_only) {
    typedef typename Traits<T>::acc A;
    __shared__ A shared[PM_LOSS_THREADS];
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* row = logits + r * classes;
        A mx, lse;
        pm_row_logsumexp<T, A>(row, classes, shared, mx, lse);
        i64 label = labels[r];
        if (threadIdx.x == 0) {
            // an out-of-range label makes the row's loss NaN rather than a plausible number
            A picked = (label >= 0 && label < classes) ? Traits<T>::load(row[label]) - mx
                                                       : (A)__longlong_as_double(0x7ff8000000000000LL);
            loss[r] = Traits<T>::store(lse - picked);
        }
        if (grad) {
            for (i64 j = threadIdx.x; j < classes; j += blockDim.x) {
                A p = exp(Traits<T>::load(row[j]) - mx - lse);
                grad[r * classes + j] = Traits<T>::store(probs_only ? p : (p - (j == label ? A(1) : A(0))) * (A)grad_scale);
            }
        }
    }
}

template <typename T>
__global__ void softmax_xent_prob(const T* __restrict__ logits, const T* __restrict__ target, T* __restrict__ loss,
                                  T* __restrict__ grad, i64 rows, i64 classes, double grad_scale,
                                   int probs_only) {
    typedef typename Traits<T>::acc A;
    __shared__ A shared[PM_LOSS_THREADS];
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* row = logits + r * classes;
        const T* t = target + r * classes;
        A mx, lse;
        pm_row_logsumexp<T, A>(row, classes, shared, mx, lse);
        A part = A(0);
        for (i64 j = threadIdx.x; j < classes; j += blockDim.x) {
            A tj = Traits<T>::load(t[j]);
            if (tj != A(0)) part -= tj * (Traits<T>::load(row[j]) - mx - lse);
        }
        A total = pm_block_reduce<A>(part, false, shared);
        if (threadIdx.x == 0) loss[r] = Traits<T>::store(total);
        if (grad) {
            for (i64 j = threadIdx.x; j < classes; j += blockDim.x) {
                A p = exp(Traits<T>::load(row[j]) - mx - lse);
                grad[r * classes + j] = Traits<T>::store(probs_only ? p : (p - Traits<T>::load(t[j])) * (A)grad_scale);
            }
        }
    }
}

// dx = (probs - onehot(label)) * dloss[row], elementwise over (rows, classes).
template <typename T>
__global__ void softmax_xent_index_backward(const T* __restrict__ probs, const i64* __restrict__ labels,
                                            const T* __restrict__ dloss, T* __restrict__ dx, i64 rows, i64 classes) {
    typedef typename Traits<T>::acc A;
    for (i64 i = pm_global_index(); i < rows * classes; i += pm_grid_stride()) {
        i64 r = i / classes;
        A d = Traits<T>::load(probs[i]) - (i - r * classes == labels[r] ? A(1) : A(0));
        dx[i] = Traits<T>::store(d * Traits<T>::load(dloss[r]));
    }
}

// dx = (probs * sum(target row) - target) * dloss[row], one block per row.
template <typename T>
__global__ void softmax_xent_prob_backward(const T* __restrict__ probs, const T* __restrict__ target,
                                           const T* __restrict__ dloss, T* __restrict__ dx, i64 rows, i64 classes) {
    typedef typename Traits<T>::acc A;
    __shared__ A shared[PM_LOSS_THREADS];
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* t = target + r * classes;
        A part = A(0);
        for (i64 j = threadIdx.x; j < classes; j += blockDim.x) part += Traits<T>::load(t[j]);
        A total = pm_block_reduce<A>(part, false, shared);
        A g = Traits<T>::load(dloss[r]);
        for (i64 j = threadIdx.x; j < classes; j += blockDim.x) {
            A d = Traits<T>::load(probs[r * classes + j]) * total - Traits<T>::load(t[j]);
            dx[r * classes + j] = Traits<T>::store(d * g);
        }
    }
}

// The gradient of the mean over rows of the per-row loss, from its 0-d upstream gradient dloss (null: 1): the
// kernels above with every row's upstream gradient dloss[0] / rows (one launch: no per-row gradient made first).
template <typename T>
__global__ void softmax_xent_index_mean_backward(const T* __restrict__ probs, const i64* __restrict__ labels,
                                                 const T* __restrict__ dloss, T* __restrict__ dx, i64 rows,
                                                 i64 classes) {
    typedef typename Traits<T>::acc A;
    const A g = Traits<T>::load(Traits<T>::store((dloss ? Traits<T>::load(dloss[0]) : A(1)) / (A)rows));  // stored
    for (i64 i = pm_global_index(); i < rows * classes; i += pm_grid_stride()) {
        i64 r = i / classes;
        A d = Traits<T>::load(probs[i]) - (i - r * classes == labels[r] ? A(1) : A(0));
        dx[i] = Traits<T>::store(d * g);
    }
}

template <typename T>
__global__ void softmax_xent_prob_mean_backward(const T* __restrict__ probs, const T* __restrict__ target,
                                                const T* __restrict__ dloss, T* __restrict__ dx, i64 rows,
                                                i64 classes) {
    typedef typename Traits<T>::acc A;
    __shared__ A shared[PM_LOSS_THREADS];
    const A g = Traits<T>::load(Traits<T>::store((dloss ? Traits<T>::load(dloss[0]) : A(1)) / (A)rows));
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* t = target + r * classes;
        A part = A(0);
        for (i64 j = threadIdx.x; j < classes; j += blockDim.x) part += Traits<T>::load(t[j]);
        A total = pm_block_reduce<A>(part, false, shared);
        for (i64 j = threadIdx.x; j < classes; j += blockDim.x) {
            A d = Traits<T>::load(probs[r * classes + j]) * total - Traits<T>::load(t[j]);
            dx[r * classes + j] = Traits<T>::store(d * g);
        }
    }
}

// The mean over the rows of the per-row loss and the softmax (probs) in one launch of one block, for problems
// small enough that a second launch would cost more than the work: each thread takes whole rows (t, t + blockDim,
// ...), adds their losses (each rounded to T, as the per-row kernels store it) in that order, and the block sums
// the threads' parts in a fixed tree.
template <typename T>
__global__ void softmax_xent_index_mean(const T* __restrict__ logits, const i64* __restrict__ labels,
                                        T* __restrict__ loss, T* __restrict__ probs, i64 rows, i64 classes) {
    typedef typename Traits<T>::acc A;
    __shared__ A shared[PM_LOSS_THREADS];
    A part = A(0);
    for (i64 r = threadIdx.x; r < rows; r += blockDim.x) {
        const T* row = logits + r * classes;
        A mx, lse;
        pm_thread_row_logsumexp<T, A>(row, classes, mx, lse);
        const i64 label = labels[r];
        const A picked = (label >= 0 && label < classes) ? Traits<T>::load(row[label]) - mx
                                                         : (A)__longlong_as_double(0x7ff8000000000000LL);
        part += Traits<T>::load(Traits<T>::store(lse - picked));
        for (i64 j = 0; j < classes; ++j) probs[r * classes + j] = Traits<T>::store(exp(Traits<T>::load(row[j]) - mx - lse));
    }
    const A total = pm_block_reduce<A>(part, false, shared);
    if (threadIdx.x == 0) loss[0] = Traits<T>::store(total / (A)rows);
}

template <typename T>
__global__ void softmax_xent_prob_mean(const T* __restrict__ logits, const T* __restrict__ target,
                                       T* __restrict__ loss, T* __restrict__ probs, i64 rows, i64 classes) {
    typedef typename Traits<T>::acc A;
    __shared__ A shared[PM_LOSS_THREADS];
    A part = A(0);
    for (i64 r = threadIdx.x; r < rows; r += blockDim.x) {
        const T* row = logits + r * classes;
        const T* t = target + r * classes;
        A mx, lse;
        pm_thread_row_logsumexp<T, A>(row, classes, mx, lse);
        A row_loss = A(0);
        for (i64 j = 0; j < classes; ++j) {
            A tj = Traits<T>::load(t[j]);
            if (tj != A(0)) row_loss -= tj * (Traits<T>::load(row[j]) - mx - lse);
            probs[r * classes + j] = Traits<T>::store(exp(Traits<T>::load(row[j]) - mx - lse));
        }
        part += Traits<T>::load(Traits<T>::store(row_loss));
    }
    const A total = pm_block_reduce<A>(part, false, shared);
    if (threadIdx.x == 0) loss[0] = Traits<T>::store(total / (A)rows);
}

// Keras' cross entropy of probabilities p (rows, cols) against targets packed with each sample's weight (rows,
// cols + 1: KerasLoss.prepare), reduced to scale * sum_r w_r loss_r in one launch of one block (each thread whole
// rows, its part rounded per row as the chain of ops stores it, the block's parts summed in a fixed tree).
// binary: loss_r = mean_j -(t log c + (1 - t) log(1 - c)), c = clip(p, eps, 1 - eps), t = t (1 - e) + e / 2;
// categorical: loss_r = -sum_j t log clip(p / sum(p), eps, 1 - eps), t = t (1 - e) + e / cols.
template <typename T, typename A>
__device__ A pm_keras_xent_row(const T* p, const T* t, i64 cols, int binary, A e, A eps) {
    A total = A(1);
    if (!binary) {
        total = A(0);
        for (i64 j = 0; j < cols; ++j) total += Traits<T>::load(p[j]);
    }
    const A shift = binary ? e * A(0.5) : e / (A)cols;
    A loss = A(0);
    for (i64 j = 0; j < cols; ++j) {
        const A tj = Traits<T>::load(t[j]) * (A(1) - e) + shift;
        A c = binary ? Traits<T>::load(p[j]) : Traits<T>::load(p[j]) / total;
        c = c < eps ? eps : (c > A(1) - eps ? A(1) - eps : c);
        loss -= binary ? tj * log(c) + (A(1) - tj) * log(A(1) - c) : tj * log(c);
    }
    return binary ? loss / (A)cols : loss;
}

template <typename T>
__global__ void keras_prob_xent(const T* __restrict__ p, const T* __restrict__ packed, T* __restrict__ loss,
                                i64 rows, i64 cols, int binary, double smoothing, double eps, double scale) {
    typedef typename Traits<T>::acc A;
    __shared__ A shared[PM_LOSS_THREADS];
    A part = A(0);
    for (i64 r = threadIdx.x; r < rows; r += blockDim.x) {
        const A row = Traits<T>::load(Traits<T>::store(
            pm_keras_xent_row<T, A>(p + r * cols, packed + r * (cols + 1), cols, binary, (A)smoothing, (A)eps)));
        part += Traits<T>::load(Traits<T>::store(row * Traits<T>::load(packed[r * (cols + 1) + cols])));
    }
    const A total = pm_block_reduce<A>(part, false, shared);
    if (threadIdx.x == 0) loss[0] = Traits<T>::store(total * (A)scale);
}

// dp of keras_prob_xent's loss for its 0-d upstream gradient dloss (null: 1), one thread per row. The gradient
// passes where the clip does not bind (eps < c < 1 - eps): binary (c - t) / (c (1 - c)) / cols; categorical through
// q = p / sum(p): dq = -t / c, dp = (dq - sum(dq q)) / sum(p).
template <typename T>
__global__ void keras_prob_xent_backward(const T* __restrict__ p, const T* __restrict__ packed,
                                         const T* __restrict__ dloss, T* __restrict__ dp, i64 rows, i64 cols,
                                         int binary, double smoothing, double eps, double scale) {
    typedef typename Traits<T>::acc A;
    const A e = (A)smoothing, lo = (A)eps, hi = A(1) - (A)eps;
    const A g = (dloss ? Traits<T>::load(dloss[0]) : A(1)) * (A)scale;
    for (i64 r = pm_global_index(); r < rows; r += pm_grid_stride()) {
        const T* pr = p + r * cols;
        const T* t = packed + r * (cols + 1);
        const A gr = g * Traits<T>::load(t[cols]);
        if (binary) {
            for (i64 j = 0; j < cols; ++j) {
                const A tj = Traits<T>::load(t[j]) * (A(1) - e) + e * A(0.5);
                const A pj = Traits<T>::load(pr[j]);
                const A c = pj < lo ? lo : (pj > hi ? hi : pj);
                dp[r * cols + j] = Traits<T>::store(pj > lo && pj < hi ? gr * (c - tj) / (c * (A(1) - c)) / (A)cols
                                                                       : A(0));
            }
            continue;
        }
        A total = A(0);
        for (i64 j = 0; j < cols; ++j) total += Traits<T>::load(pr[j]);
        A centre = A(0);
        for (i64 j = 0; j < cols; ++j) {
            const A q = Traits<T>::load(pr[j]) / total;
            if (q > lo && q < hi) centre -= Traits<T>::load(t[j]) * (A(1) - e) + e / (A)cols;  // sum dq q
        }
        for (i64 j = 0; j < cols; ++j) {
            const A q = Traits<T>::load(pr[j]) / total;
            const A dq = q > lo && q < hi ? -(Traits<T>::load(t[j]) * (A(1) - e) + e / (A)cols) / q : A(0);
            dp[r * cols + j] = Traits<T>::store(gr * (dq - centre) / total);
        }
    }
}

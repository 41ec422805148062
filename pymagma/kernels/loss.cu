// Fused softmax + cross-entropy over the last axis of (rows, classes) logits: per-row loss and the gradient
// (softmax - target) * grad_scale, one block per row.  Targets are class indices or per-class probabilities.
#include "common.cuh"

#define PM_LOSS_THREADS 256

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

template <typename T>
__global__ void softmax_xent_index(const T* __restrict__ logits, const i64* __restrict__ labels, T* __restrict__ loss,
                                   T* __restrict__ grad, i64 rows, i64 classes, double grad_scale) {
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
                grad[r * classes + j] = Traits<T>::store((p - (j == label ? A(1) : A(0))) * (A)grad_scale);
            }
        }
    }
}

template <typename T>
__global__ void softmax_xent_prob(const T* __restrict__ logits, const T* __restrict__ target, T* __restrict__ loss,
                                  T* __restrict__ grad, i64 rows, i64 classes, double grad_scale) {
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
                grad[r * classes + j] = Traits<T>::store((p - Traits<T>::load(t[j])) * (A)grad_scale);
            }
        }
    }
}

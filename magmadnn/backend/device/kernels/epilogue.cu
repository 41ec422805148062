// Epilogues of a matrix product or a convolution: the bias over channels and the activation in one pass, and their
// backward (the activation's gradient and the bias gradient) in one launch.  x is (outer, channels, inner)
// contiguous: dense rows (N, F, 1) or NCHW (N, C, H*W); op and grad_op are elementwise.cu's codes
// (pymagma.kernels.UNARY_OPS and ACTIVATION_GRADS), computed by the same device functions (activation.cuh).
#include "common.cuh"
#include "activation.cuh"

#define PM_EPILOGUE_THREADS 256

// z = x + bias[c] rounded to T; y = act(z).  keep: z is written back over x (the backward of a kind that reads the
// activation's input needs it); else x is left as it was.
template <typename T>
__global__ void bias_act(T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ y, i64 n, i64 channels,
                         i64 inner, int op, double alpha, int keep) {
    typedef typename Traits<T>::acc A;
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        const i64 c = (i / inner) % channels;
        const T z = Traits<T>::store(Traits<T>::load(x[i]) + Traits<T>::load(bias[c]));
        if (keep) x[i] = z;
        const A zv = Traits<T>::load(z);
        // a NaN stays NaN whatever the kind (cuDNN's and NumPy's ReLU; unary_op's relu code makes it 0)
        y[i] = Traits<T>::store(zv != zv ? zv : unary_op<A>(op, zv, (A)alpha, A(0)));
    }
}

// dx = act'(dy; z, y) (z or y may be null where grad_op does not read it); db[c] = the sum of dx (as stored) over
// outer and inner, one block per channel in a fixed order; db may be null.
template <typename T>
__global__ void bias_act_backward(const T* __restrict__ dy, const T* __restrict__ z, const T* __restrict__ y,
                                  T* __restrict__ dx, T* __restrict__ db, i64 outer, i64 channels, i64 inner,
                                  int grad_op, double alpha) {
    typedef typename Traits<T>::acc A;
    __shared__ A shared[PM_EPILOGUE_THREADS];
    const i64 count = outer * inner;
    for (i64 c = blockIdx.x; c < channels; c += gridDim.x) {
        A part = A(0);
        for (i64 k = threadIdx.x; k < count; k += blockDim.x) {
            const i64 o = k / inner;
            const i64 i = (o * channels + c) * inner + (k - o * inner);
            const A zi = z ? Traits<T>::load(z[i]) : A(0);
            const A yi = y ? Traits<T>::load(y[i]) : A(0);
            const T d = Traits<T>::store(activation_grad<A>(grad_op, Traits<T>::load(dy[i]), zi, yi, (A)alpha));
            dx[i] = d;
            part += Traits<T>::load(d);
        }
        const A total = pm_block_reduce<A>(part, false, shared);
        if (db && threadIdx.x == 0) db[c] = Traits<T>::store(total);
    }
}

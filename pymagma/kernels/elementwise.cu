// Elementwise kernels: unary and binary maps (contiguous and strided/broadcast), channel bias, fill, cast, copy.
// The operation is a runtime code, uniform over the launch, so each kernel is instantiated once per dtype.
#include "common.cuh"
#include "activation.cuh"

// Binary op codes (keep in sync with pymagma.kernels.BINARY_OPS).
template <typename A> __device__ __forceinline__ A binary_op(int op, A a, A b) {
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return a / b;
        case 4: return a > b ? a : b;
        case 5: return a < b ? a : b;
        case 6: return pow(a, b);
        case 7: return b > A(0) ? a : A(0);              // relu backward: a = dy, b = x
        case 8: return a * b * (A(1) - b);               // sigmoid backward: a = dy, b = y
        case 9: return a * (A(1) - b * b);               // tanh backward: a = dy, b = y
        case 10: return a == b ? A(1) : A(0);
        case 11: return a > b ? A(1) : A(0);
        case 12: return a < b ? A(1) : A(0);
        case 13: return (a - b) * (a - b);
        case 14: return a >= b ? A(1) : A(0);
        case 15: return a <= b ? A(1) : A(0);
        case 16: return a != b ? A(1) : A(0);
        default: return a;
    }
}

template <typename T>
__global__ void unary(int op, const T* __restrict__ x, T* __restrict__ y, i64 n, double p, double q) {
    typedef typename Traits<T>::acc A;
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride())
        y[i] = Traits<T>::store(unary_op<A>(op, Traits<T>::load(x[i]), (A)p, (A)q));
}

template <typename T>
__global__ void binary(int op, const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, i64 n) {
    typedef typename Traits<T>::acc A;
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride())
        y[i] = Traits<T>::store(binary_op<A>(op, Traits<T>::load(a[i]), Traits<T>::load(b[i])));
}

// y[s2] = a[s0] op b[s1] over the broadcast shape (s.s0: strides of a, s.s1: of b, s.s2: of y).
template <typename T>
__global__ void binary_strided(int op, const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, i64 n,
                               Strides3 s) {
    typedef typename Traits<T>::acc A;
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 oa, ob, oy;
        pm_offsets(s, i, oa, ob, oy);
        y[oy] = Traits<T>::store(binary_op<A>(op, Traits<T>::load(a[oa]), Traits<T>::load(b[ob])));
    }
}

// y = x op s (or s op x when scalar_first) with the scalar s rounded to T first: a Python scalar takes the array's
// dtype, as in NumPy.
template <typename T>
__global__ void binary_scalar(int op, const T* __restrict__ x, T* __restrict__ y, i64 n, double s, int scalar_first) {
    typedef typename Traits<T>::acc A;
    const A b = Traits<T>::load(Traits<T>::store((A)s));
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        A a = Traits<T>::load(x[i]);
        y[i] = Traits<T>::store(scalar_first ? binary_op<A>(op, b, a) : binary_op<A>(op, a, b));
    }
}

// y (contiguous) = cond != 0 ? a : b over the broadcast shape (s.s0, s.s1, s.s2: strides of cond, a, b).
template <typename T>
__global__ void select(const T* __restrict__ cond, const T* __restrict__ a, const T* __restrict__ b,
                       T* __restrict__ y, i64 n, Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 oc, oa, ob;
        pm_offsets(s, i, oc, oa, ob);
        y[i] = Traits<T>::load(cond[oc]) != 0 ? a[oa] : b[ob];
    }
}

template <typename T>
__global__ void activation_backward(int op, const T* __restrict__ dy, const T* __restrict__ x,
                                    const T* __restrict__ y, T* __restrict__ dx, i64 n, double alpha) {
    typedef typename Traits<T>::acc A;
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        A xi = x ? Traits<T>::load(x[i]) : A(0);
        A yi = y ? Traits<T>::load(y[i]) : A(0);
        dx[i] = Traits<T>::store(activation_grad<A>(op, Traits<T>::load(dy[i]), xi, yi, (A)alpha));
    }
}

// y = x + bias[c] for x of shape (N, C, inner...) contiguous: channel c = (i / inner) % channels.
template <typename T>
__global__ void bias_channels(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ y, i64 n,
                              i64 channels, i64 inner) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 c = (i / inner) % channels;
        y[i] = Traits<T>::store(Traits<T>::load(x[i]) + Traits<T>::load(bias[c]));
    }
}

template <typename T> __global__ void fill(T* __restrict__ y, i64 n, double value) {
    T v = Traits<T>::store((typename Traits<T>::acc)value);
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) y[i] = v;
}

template <typename S, typename D> __global__ void cast(const S* __restrict__ x, D* __restrict__ y, i64 n) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride())
        y[i] = Convert<S, D>::run(x[i]);
}

// y[s1] = x[s0]: gather a strided (transposed, sliced, broadcast) view into any layout.
template <typename T> __global__ void copy_strided(const T* __restrict__ x, T* __restrict__ y, i64 n, Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 ox, oy, unused;
        pm_offsets(s, i, ox, oy, unused);
        y[oy] = x[ox];
    }
}

// y = x[s0] / divisor into contiguous y: a broadcast (or any strided view) materialised and divided in one pass.
template <typename T>
__global__ void divide_strided(const T* __restrict__ x, T* __restrict__ y, i64 n, Strides3 s, double divisor) {
    typedef typename Traits<T>::acc A;
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 ox, oy, unused;
        pm_offsets(s, i, ox, oy, unused);
        y[oy] = Traits<T>::store(Traits<T>::load(x[ox]) / (A)divisor);
    }
}

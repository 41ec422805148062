// Elementwise kernels: unary and binary maps (contiguous and strided/broadcast), channel bias, fill, cast, copy.
// The operation is a runtime code, uniform over the launch, so each kernel is instantiated once per dtype.
#include "common.cuh"

#define PM_GELU_C 0.7978845608028654        // sqrt(2 / pi)
#define PM_SQRT_HALF 0.7071067811865476     // sqrt(1 / 2)
#define PM_INV_SQRT_2PI 0.3989422804014327  // 1 / sqrt(2 pi)
#define PM_SELU_ALPHA 1.6732632423543772
#define PM_SELU_SCALE 1.0507009873554805

template <typename A> __device__ __forceinline__ A pm_sigmoid(A x) {
    return x >= A(0) ? A(1) / (A(1) + exp(-x)) : exp(x) / (A(1) + exp(x));  // never overflows
}

// Unary op codes (keep in sync with pymagma.kernels.UNARY_OPS).
template <typename A> __device__ __forceinline__ A unary_op(int op, A x, A p, A q) {
    switch (op) {
        case 0: return -x;
        case 1: return x < A(0) ? -x : x;
        case 2: return exp(x);
        case 3: return log(x);
        case 4: return sqrt(x);
        case 5: return x * x;
        case 6: return x > A(0) ? x : A(0);                             // relu
        case 7: return A(1) / (A(1) + exp(-x));                          // sigmoid
        case 8: return tanh(x);
        case 9: return (x > A(0)) ? A(1) : ((x < A(0)) ? A(-1) : A(0));  // sign
        case 10: return A(1) / x;
        case 11: return p * x + q;                                       // affine: p*x + q
        case 12: return pow(x, p);
        case 13: return x < p ? p : (x > q ? q : x);                     // clip to [p, q]
        case 14: return x > A(0) ? x : p * (exp(x) - A(1));              // elu(alpha=p)
        case 15: return x > A(0) ? x : p * x;                            // leaky relu(slope=p)
        case 16: return A(1) / sqrt(x);
        case 17: return A(0.5) * x * (A(1) + tanh(A(PM_GELU_C) * (x + A(0.044715) * x * x * x)));  // gelu_tanh
        case 18: return A(0.5) * x * (A(1) + erf(x * A(PM_SQRT_HALF)));  // gelu (exact)
        case 19: return x * pm_sigmoid(x);                                // silu
        case 20: return (x > A(0) ? x : A(0)) + log1p(exp(x < A(0) ? x : -x));  // softplus, no overflow
        case 21: return x / (A(1) + (x < A(0) ? -x : x));                // softsign
        case 22: return A(PM_SELU_SCALE) * (x > A(0) ? x : A(PM_SELU_ALPHA) * expm1(x));  // selu
        case 23: {                                                        // hard sigmoid: relu6(x + 3) / 6
            A t = x + A(3);
            return (t < A(0) ? A(0) : (t > A(6) ? A(6) : t)) / A(6);
        }
        default: return x;
    }
}

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

// Activation gradient codes (keep in sync with pymagma.kernels.ACTIVATION_GRADS): dx from dy, the forward input x
// and output y (either may be null when the kind does not read it).
template <typename A> __device__ __forceinline__ A activation_grad(int op, A dy, A x, A y, A alpha) {
    switch (op) {
        case 0: return x > A(0) ? dy : A(0);                            // relu (x or y)
        case 1: return dy * (y * (A(1) - y));                           // sigmoid (y)
        case 2: return dy * (A(1) - y * y);                             // tanh (y)
        case 3: return x > A(0) ? dy : dy * alpha;                      // leaky relu (x)
        case 4: return x > A(0) ? dy : dy * (y + alpha);                // elu (x, y)
        case 5: {                                                       // gelu, tanh approximation (x)
            A x2 = x * x;
            A t = tanh(A(PM_GELU_C) * (x + A(0.044715) * x2 * x));
            return dy * (A(0.5) * (A(1) + t) + A(0.5) * x * (A(1) - t * t) * (A(PM_GELU_C) * (A(1) + A(3 * 0.044715) * x2)));
        }
        case 6:                                                         // gelu, exact: Phi(x) + x phi(x) (x)
            return dy * (A(0.5) * (A(1) + erf(x * A(PM_SQRT_HALF))) + x * A(PM_INV_SQRT_2PI) * exp(A(-0.5) * x * x));
        case 7: {                                                       // silu: s (1 + x (1 - s)) (x)
            A s = pm_sigmoid(x);
            return dy * (s * (A(1) + x * (A(1) - s)));
        }
        case 8: return dy * pm_sigmoid(x);                              // softplus (x)
        case 9: {                                                       // softsign: 1 / (1 + |x|)^2 (x)
            A d = A(1) + (x < A(0) ? -x : x);
            return dy / (d * d);
        }
        case 10: return x > A(0) ? dy * A(PM_SELU_SCALE) : dy * (y + A(PM_SELU_SCALE * PM_SELU_ALPHA));  // selu (x, y)
        case 11: return (x > A(-3) && x < A(3)) ? dy / A(6) : A(0);     // hard sigmoid (x)
        case 12: return dy * y;                                         // exponential (y)
        default: return dy;
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

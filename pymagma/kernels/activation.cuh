// The activation functions and their gradients as device functions of an accumulation type: elementwise.cu's
// unary and activation_backward kernels and the deep-learning epilogues (bias + activation) share them.
#pragma once
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


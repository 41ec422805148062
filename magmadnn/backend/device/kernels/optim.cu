// Fused in-place optimizer updates over flat parameter, gradient and state buffers (state kept in T).
// Conventions follow the usual framework definitions; weight decay is L2 (added to the gradient) unless stated.
// PM_KERAS in a rule's flags selects Keras 3's form: decoupled weight decay (w -= lr*wd*w first) and Keras'
// epsilon placement (Adam: outside the bias-corrected root; RMSprop, Adagrad: inside the root).
// Each rule is one __device__ function of an element, shared with step.cu (the same rules with the per-step values
// read from device memory), so that both do the same arithmetic, operation for operation.
#include "common.cuh"

#define PM_KERAS 2

// SGD with optional momentum (buf may be null when momentum == 0) and Nesterov momentum (flags & 1; PM_KERAS:
// decoupled weight decay).
template <typename T>
__device__ __forceinline__ void sgd_element(T* p, const T* g, T* buf, i64 i, double lr, double momentum,
                                            double weight_decay, int flags) {
    typedef typename Traits<T>::acc A;
    A w = Traits<T>::load(p[i]);
    A d = Traits<T>::load(g[i]);
    if (flags & PM_KERAS) w -= (A)(lr * weight_decay) * w;
    else d += (A)weight_decay * w;
    if (buf) {
        A v = (A)momentum * Traits<T>::load(buf[i]) + d;
        buf[i] = Traits<T>::store(v);
        d = (flags & 1) ? d + (A)momentum * v : v;
    }
    p[i] = Traits<T>::store(w - (A)lr * d);
}

// Adam (decoupled & 1 = 0, L2 weight decay) or AdamW (decoupled & 1); bc1 = 1 - beta1^t, bc2 = 1 - beta2^t.
// PM_KERAS: p -= lr sqrt(bc2) / bc1 * m / (sqrt(v) + eps) (Keras), else p -= lr (m / bc1) / (sqrt(v / bc2) + eps).
template <typename T>
__device__ __forceinline__ void adam_element(T* p, const T* g, T* m, T* v, i64 i, double lr, double beta1,
                                             double beta2, double eps, double weight_decay, int decoupled,
                                             double bc1, double bc2) {
    typedef typename Traits<T>::acc A;
    A w = Traits<T>::load(p[i]);
    A d = Traits<T>::load(g[i]);
    if (decoupled & 1) w -= (A)(lr * weight_decay) * w;
    else d += (A)weight_decay * w;
    A mi = (A)beta1 * Traits<T>::load(m[i]) + (A)(1.0 - beta1) * d;
    A vi = (A)beta2 * Traits<T>::load(v[i]) + (A)(1.0 - beta2) * d * d;
    m[i] = Traits<T>::store(mi);
    v[i] = Traits<T>::store(vi);
    if (decoupled & PM_KERAS) p[i] = Traits<T>::store(w - (A)(lr * sqrt(bc2) / bc1) * mi / (sqrt(vi) + (A)eps));
    else p[i] = Traits<T>::store(w - (A)lr * (mi / (A)bc1) / (sqrt(vi / (A)bc2) + (A)eps));
}

// RMSProp: s = rho*s + (1-rho)*g^2; p -= lr*g/(sqrt(s)+eps) (PM_KERAS: lr*g/sqrt(s+eps), decoupled decay).
template <typename T>
__device__ __forceinline__ void rmsprop_element(T* p, const T* g, T* s, i64 i, double lr, double rho, double eps,
                                                double weight_decay, int flags) {
    typedef typename Traits<T>::acc A;
    A w = Traits<T>::load(p[i]);
    A d = Traits<T>::load(g[i]);
    if (flags & PM_KERAS) w -= (A)(lr * weight_decay) * w;
    else d += (A)weight_decay * w;
    A si = (A)rho * Traits<T>::load(s[i]) + (A)(1.0 - rho) * d * d;
    s[i] = Traits<T>::store(si);
    A root = (flags & PM_KERAS) ? sqrt(si + (A)eps) : sqrt(si) + (A)eps;
    p[i] = Traits<T>::store(w - (A)lr * d / root);
}

// AdaGrad: s += g^2; p -= lr*g/(sqrt(s)+eps) (PM_KERAS: lr*g/sqrt(s+eps), decoupled decay).
template <typename T>
__device__ __forceinline__ void adagrad_element(T* p, const T* g, T* s, i64 i, double lr, double eps,
                                                double weight_decay, int flags) {
    typedef typename Traits<T>::acc A;
    A w = Traits<T>::load(p[i]);
    A d = Traits<T>::load(g[i]);
    if (flags & PM_KERAS) w -= (A)(lr * weight_decay) * w;
    else d += (A)weight_decay * w;
    A si = Traits<T>::load(s[i]) + d * d;
    s[i] = Traits<T>::store(si);
    A root = (flags & PM_KERAS) ? sqrt(si + (A)eps) : sqrt(si) + (A)eps;
    p[i] = Traits<T>::store(w - (A)lr * d / root);
}

template <typename T>
__global__ void sgd(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf, i64 n, double lr,
                    double momentum, double weight_decay, int nesterov) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride())
        sgd_element(p, g, buf, i, lr, momentum, weight_decay, nesterov);
}

template <typename T>
__global__ void adam(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m, T* __restrict__ v, i64 n,
                     double lr, double beta1, double beta2, double eps, double weight_decay, int decoupled,
                     double bc1, double bc2) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride())
        adam_element(p, g, m, v, i, lr, beta1, beta2, eps, weight_decay, decoupled, bc1, bc2);
}

template <typename T>
__global__ void rmsprop(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ s, i64 n, double lr, double rho,
                        double eps, double weight_decay, int flags) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride())
        rmsprop_element(p, g, s, i, lr, rho, eps, weight_decay, flags);
}

template <typename T>
__global__ void adagrad(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ s, i64 n, double lr, double eps,
                        double weight_decay, int flags) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride())
        adagrad_element(p, g, s, i, lr, eps, weight_decay, flags);
}

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

// ------------------------------------------------------------------------------------------ multi-tensor updates
// One launch updates up to PM_MANY tensors of one dtype (PyTorch's foreach/fused optimizers do the same): the
// buffers travel by value in the kernel's parameters, so nothing is uploaded and a captured graph keeps them.
// a[0][t] is tensor t's parameter, a[1][t] its gradient, a[2][t] and a[3][t] its state (null where unused);
// tensor t covers the flat indices [start[t], start[t + 1]) of the launch, count tensors in all (start strictly
// increasing: no empty tensor). Each element runs the single-tensor rule above, operation for operation.
// values: null (lr, bc1, bc2 as given) or the device vector {lr, bc1, bc2} of a replayed step (step.cu's).
#define PM_MANY 48

struct ManyTensors {
    void* a[4][PM_MANY];
    i64 start[PM_MANY + 1];
    int count;
};

// The tensor holding flat index i: the last t with start[t] <= i.
__device__ __forceinline__ int pm_many_find(const ManyTensors& t, i64 i) {
    int lo = 0, hi = t.count - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (t.start[mid] <= i) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

template <typename T>
__global__ void sgd_many(ManyTensors t, const double* __restrict__ values, double lr, double momentum,
                         double weight_decay, int flags) {
    if (values) lr = values[0];
    const i64 total = t.start[t.count];
    for (i64 i = pm_global_index(); i < total; i += pm_grid_stride()) {
        const int k = pm_many_find(t, i);
        sgd_element((T*)t.a[0][k], (const T*)t.a[1][k], (T*)t.a[2][k], i - t.start[k], lr, momentum,
                    weight_decay, flags);
    }
}

template <typename T>
__global__ void adam_many(ManyTensors t, const double* __restrict__ values, double lr, double beta1, double beta2,
                          double eps, double weight_decay, int decoupled, double bc1, double bc2) {
    if (values) {
        lr = values[0];
        bc1 = values[1];
        bc2 = values[2];
    }
    const i64 total = t.start[t.count];
    for (i64 i = pm_global_index(); i < total; i += pm_grid_stride()) {
        const int k = pm_many_find(t, i);
        adam_element((T*)t.a[0][k], (const T*)t.a[1][k], (T*)t.a[2][k], (T*)t.a[3][k], i - t.start[k], lr, beta1,
                     beta2, eps, weight_decay, decoupled, bc1, bc2);
    }
}

template <typename T>
__global__ void rmsprop_many(ManyTensors t, const double* __restrict__ values, double lr, double rho, double eps,
                             double weight_decay, int flags) {
    if (values) lr = values[0];
    const i64 total = t.start[t.count];
    for (i64 i = pm_global_index(); i < total; i += pm_grid_stride()) {
        const int k = pm_many_find(t, i);
        rmsprop_element((T*)t.a[0][k], (const T*)t.a[1][k], (T*)t.a[2][k], i - t.start[k], lr, rho, eps,
                        weight_decay, flags);
    }
}

template <typename T>
__global__ void adagrad_many(ManyTensors t, const double* __restrict__ values, double lr, double eps,
                             double weight_decay, int flags) {
    if (values) lr = values[0];
    const i64 total = t.start[t.count];
    for (i64 i = pm_global_index(); i < total; i += pm_grid_stride()) {
        const int k = pm_many_find(t, i);
        adagrad_element((T*)t.a[0][k], (const T*)t.a[1][k], (T*)t.a[2][k], i - t.start[k], lr, eps, weight_decay,
                        flags);
    }
}

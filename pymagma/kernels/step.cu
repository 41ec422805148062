// The optimizer updates and dropout of optim.cu and random.cu with their per-step values read from device memory
// at run time instead of taken as arguments, so that a step captured once as a CUDA graph can be replayed: the host
// writes the values of the next step (learning rate, bias corrections, random offsets) into that memory before
// each launch.  The arithmetic is theirs, operation for operation, so a replayed step equals an eager one bit for
// bit.  values = {lr, bc1, bc2} (bc = 1 - beta^t, Adam only); offsets[slot] is the Philox offset of one draw (int64 memory read as u64).
#include "common.cuh"
#include "random.cu"

template <typename T>
__global__ void sgd_at(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf, i64 n,
                       const double* __restrict__ values, double momentum, double weight_decay, int nesterov) {
    typedef typename Traits<T>::acc A;
    const double lr = values[0];
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        A w = Traits<T>::load(p[i]);
        A d = Traits<T>::load(g[i]) + (A)weight_decay * w;
        if (buf) {
            A v = (A)momentum * Traits<T>::load(buf[i]) + d;
            buf[i] = Traits<T>::store(v);
            d = nesterov ? d + (A)momentum * v : v;
        }
        p[i] = Traits<T>::store(w - (A)lr * d);
    }
}

template <typename T>
__global__ void adam_at(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m, T* __restrict__ v, i64 n,
                        const double* __restrict__ values, double beta1, double beta2, double eps,
                        double weight_decay, int decoupled) {
    typedef typename Traits<T>::acc A;
    const double lr = values[0], bc1 = values[1], bc2 = values[2];
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        A w = Traits<T>::load(p[i]);
        A d = Traits<T>::load(g[i]);
        if (decoupled) w -= (A)(lr * weight_decay) * w;
        else d += (A)weight_decay * w;
        A mi = (A)beta1 * Traits<T>::load(m[i]) + (A)(1.0 - beta1) * d;
        A vi = (A)beta2 * Traits<T>::load(v[i]) + (A)(1.0 - beta2) * d * d;
        m[i] = Traits<T>::store(mi);
        v[i] = Traits<T>::store(vi);
        p[i] = Traits<T>::store(w - (A)lr * (mi / (A)bc1) / (sqrt(vi / (A)bc2) + (A)eps));
    }
}

template <typename T>
__global__ void rmsprop_at(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ s, i64 n,
                           const double* __restrict__ values, double rho, double eps, double weight_decay) {
    typedef typename Traits<T>::acc A;
    const double lr = values[0];
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        A w = Traits<T>::load(p[i]);
        A d = Traits<T>::load(g[i]) + (A)weight_decay * w;
        A si = (A)rho * Traits<T>::load(s[i]) + (A)(1.0 - rho) * d * d;
        s[i] = Traits<T>::store(si);
        p[i] = Traits<T>::store(w - (A)lr * d / (sqrt(si) + (A)eps));
    }
}

template <typename T>
__global__ void adagrad_at(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ s, i64 n,
                           const double* __restrict__ values, double eps, double weight_decay) {
    typedef typename Traits<T>::acc A;
    const double lr = values[0];
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        A w = Traits<T>::load(p[i]);
        A d = Traits<T>::load(g[i]) + (A)weight_decay * w;
        A si = Traits<T>::load(s[i]) + d * d;
        s[i] = Traits<T>::store(si);
        p[i] = Traits<T>::store(w - (A)lr * d / (sqrt(si) + (A)eps));
    }
}

template <typename T>
__global__ void dropout_at(const T* __restrict__ x, T* __restrict__ y, T* __restrict__ mask, i64 n, u64 seed,
                           const u64* __restrict__ offsets, i64 slot, double rate) {
    typedef typename Traits<T>::acc A;
    const u64 offset = offsets[slot];
    const A threshold = Traits<T>::load(Traits<T>::store((A)rate));
    const A scale = Traits<T>::load(Traits<T>::store((A)(1.0 / (1.0 - rate))));
    for (i64 j = pm_global_index(); 2 * j < n; j += pm_grid_stride()) {
        double u[2];
        pm_pair(seed, offset, (u64)j, u[0], u[1]);
        for (int k = 0; k < 2 && 2 * j + k < n; ++k) {
            i64 i = 2 * j + k;
            A m = Traits<T>::load(Traits<T>::store((A)u[k])) >= threshold ? scale : A(0);
            mask[i] = Traits<T>::store(m);
            y[i] = Traits<T>::store(Traits<T>::load(x[i]) * m);
        }
    }
}

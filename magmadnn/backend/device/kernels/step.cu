// The optimizer updates and dropout of optim.cu and dropout.cu with their per-step values read from device memory
// at run time instead of taken as arguments, so that a step captured once as a CUDA graph can be replayed: the host
// writes the values of the next step (learning rate, bias corrections, random offsets) into that memory before
// each launch.  The arithmetic is theirs (the same __device__ functions), so a replayed step equals an eager one
// bit for bit.  values = {lr, bc1, bc2} (bc = 1 - beta^t, Adam only); offsets[slot] is the Philox offset of one
// draw (int64 memory read as u64).
#include "common.cuh"
#include "optim.cu"
#include "dropout.cu"

template <typename T>
__global__ void sgd_at(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf, i64 n,
                       const double* __restrict__ values, double momentum, double weight_decay, int nesterov) {
    const double lr = values[0];
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride())
        sgd_element(p, g, buf, i, lr, momentum, weight_decay, nesterov);
}

template <typename T>
__global__ void adam_at(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m, T* __restrict__ v, i64 n,
                        const double* __restrict__ values, double beta1, double beta2, double eps,
                        double weight_decay, int decoupled) {
    const double lr = values[0], bc1 = values[1], bc2 = values[2];
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride())
        adam_element(p, g, m, v, i, lr, beta1, beta2, eps, weight_decay, decoupled, bc1, bc2);
}

template <typename T>
__global__ void rmsprop_at(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ s, i64 n,
                           const double* __restrict__ values, double rho, double eps, double weight_decay,
                           int flags) {
    const double lr = values[0];
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride())
        rmsprop_element(p, g, s, i, lr, rho, eps, weight_decay, flags);
}

template <typename T>
__global__ void adagrad_at(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ s, i64 n,
                           const double* __restrict__ values, double eps, double weight_decay, int flags) {
    const double lr = values[0];
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride())
        adagrad_element(p, g, s, i, lr, eps, weight_decay, flags);
}

template <typename T>
__global__ void dropout_at(const T* __restrict__ x, T* __restrict__ y, T* __restrict__ mask, i64 n, u64 seed,
                           const u64* __restrict__ offsets, i64 slot, double rate) {
    dropout_elements(x, y, mask, n, seed, offsets[slot], rate);
}

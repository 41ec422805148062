// Counter-based random numbers: Philox4x32-10 keyed by the 64-bit seed, counter (pair index j, 64-bit offset).
// Each counter gives four 32-bit words -> two 53-bit uniforms in (0, 1] -> outputs 2j and 2j+1; normals use
// Box-Muller on the same two uniforms.  The stream is therefore identical for every dtype and launch shape.
#include "philox.cuh"

template <typename T>
__global__ void uniform(T* __restrict__ y, i64 n, u64 seed, u64 offset, double low, double high) {
    typedef typename Traits<T>::acc A;
    for (i64 j = pm_global_index(); 2 * j < n; j += pm_grid_stride()) {
        double u0, u1;
        pm_pair(seed, offset, (u64)j, u0, u1);
        y[2 * j] = Traits<T>::store((A)(low + (high - low) * u0));
        if (2 * j + 1 < n) y[2 * j + 1] = Traits<T>::store((A)(low + (high - low) * u1));
    }
}

template <typename T>
__global__ void normal(T* __restrict__ y, i64 n, u64 seed, u64 offset, double mean, double stddev) {
    typedef typename Traits<T>::acc A;
    const double two_pi = 6.283185307179586;
    for (i64 j = pm_global_index(); 2 * j < n; j += pm_grid_stride()) {
        double u0, u1;
        pm_pair(seed, offset, (u64)j, u0, u1);
        double radius = sqrt(-2.0 * log(u0));
        y[2 * j] = Traits<T>::store((A)(mean + stddev * radius * cos(two_pi * u1)));
        if (2 * j + 1 < n) y[2 * j + 1] = Traits<T>::store((A)(mean + stddev * radius * sin(two_pi * u1)));
    }
}

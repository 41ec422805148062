// Checks of the values an op needs (token ids inside a table, key masks of 0 and 1), run on the device so that no
// host read is needed: the first value, in C order, that fails is written into a fault record that the host reads
// with what it reads anyway.  A record is four int64: the site of the fault (0 while there is none), the low and the
// high 32 bits of the value's 64 bits (an integer's own, or those of the double a float converts to), and the flat
// index of the value.  A record that holds a fault is never written again until the host clears it: the first fault
// of a run is the one reported, whatever runs after it.  One block: its threads take the values in turn and a
// fixed-order block reduction finds the smallest failing index (the same answer on every run).
#include "common.cuh"

#define PM_CHECK_THREADS 256

// A value as check_range compares it (integers exactly), the type its bounds come in, and the 64 bits a record
// keeps of it.
template <typename T> struct CheckValue {
    typedef double bound;
    static __device__ __forceinline__ double value(T v) { return (double)Traits<T>::load(v); }
    static __device__ __forceinline__ i64 bits(T v) { return __double_as_longlong((double)Traits<T>::load(v)); }
    static __device__ __forceinline__ bool binary(T v) {
        typename Traits<T>::acc a = Traits<T>::load(v);
        return a == 0 || a == 1;
    }
};
template <> struct CheckValue<i64> {
    typedef i64 bound;
    static __device__ __forceinline__ i64 value(i64 v) { return v; }
    static __device__ __forceinline__ i64 bits(i64 v) { return v; }
    static __device__ __forceinline__ bool binary(i64 v) { return v == 0 || v == 1; }
};
template <> struct CheckValue<int> {
    typedef i64 bound;
    static __device__ __forceinline__ i64 value(int v) { return (i64)v; }
    static __device__ __forceinline__ i64 bits(int v) { return (i64)v; }
    static __device__ __forceinline__ bool binary(int v) { return v == 0 || v == 1; }
};

// The smallest failing index of the block (n when none) into the record, by thread 0, unless it holds a fault.
template <typename T>
__device__ void pm_check_report(const T* x, i64 first, i64 n, i64 site, i64* record, i64* shared) {
    first = -pm_block_reduce<i64>(-first, true, shared);
    if (threadIdx.x == 0 && first < n && record[0] == 0) {
        i64 bits = CheckValue<T>::bits(x[first]);
        record[1] = bits & 0xffffffffLL;
        record[2] = (i64)((u64)bits >> 32);
        record[3] = first;
        record[0] = site;
    }
}

// x[i] in [low, high) for every i < n (NaN is outside every range).
template <typename T>
__global__ void check_range(const T* __restrict__ x, i64 n, typename CheckValue<T>::bound low,
                            typename CheckValue<T>::bound high, i64 site, i64* __restrict__ record) {
    __shared__ i64 shared[PM_CHECK_THREADS];
    i64 first = n;
    for (i64 e = threadIdx.x; e < n; e += blockDim.x) {
        typename CheckValue<T>::bound v = CheckValue<T>::value(x[e]);
        if (!(v >= low && v < high)) {
            first = e;
            break;
        }
    }
    pm_check_report(x, first, n, site, record, shared);
}

// x[i] is 0 or 1 for every i < n.
template <typename T>
__global__ void check_binary(const T* __restrict__ x, i64 n, i64 site, i64* __restrict__ record) {
    __shared__ i64 shared[PM_CHECK_THREADS];
    i64 first = n;
    for (i64 e = threadIdx.x; e < n; e += blockDim.x) {
        if (!CheckValue<T>::binary(x[e])) {
            first = e;
            break;
        }
    }
    pm_check_report(x, first, n, site, record, shared);
}

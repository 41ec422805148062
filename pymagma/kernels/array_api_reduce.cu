// The array API standard's reductions, scans, sorts and the kernels of searching and set functions.  One GPU thread
// per output element (or per row along an axis) walks its elements in order: no barriers, no atomics, so results
// do not depend on block order and are the same on every run.  Strided operands are read in place through Strides3
// (s0: input element strides of the kept axes, s1: the output's); correctness over speed (a sort is a per-row
// bottom-up merge sort in a scratch buffer).  Integers wrap like NumPy (unsigned arithmetic), float sums, means
// and variances accumulate in double; scans accumulate in the element type, as NumPy's cumsum does.  All but
// ar_where are instantiated for int64, uint64, float32 and float64 only: narrower integers and bool arrive as int64.
#include "common.cuh"

template <typename T> struct ARFloat { static const bool value = false; };
template <> struct ARFloat<float> { static const bool value = true; };
template <> struct ARFloat<double> { static const bool value = true; };
template <typename T> struct ARBool { static const bool value = false; };
template <> struct ARBool<bool> { static const bool value = true; };
template <typename T> struct ARWide { typedef T type; };  // the type sums are carried in
template <> struct ARWide<float> { typedef double type; };
template <typename T> struct ARUnsigned { typedef T type; };
template <> struct ARUnsigned<signed char> { typedef unsigned char type; };
template <> struct ARUnsigned<int> { typedef unsigned int type; };
template <> struct ARUnsigned<i64> { typedef u64 type; };

template <typename A> __device__ __forceinline__ A ar_add(A a, A b) {
    if constexpr (ARBool<A>::value) return a || b;
    else if constexpr (ARFloat<A>::value) return a + b;
    else return (A)((typename ARUnsigned<A>::type)a + (typename ARUnsigned<A>::type)b);
}
template <typename A> __device__ __forceinline__ A ar_mul(A a, A b) {
    if constexpr (ARBool<A>::value) return a && b;
    else if constexpr (ARFloat<A>::value) return a * b;
    else return (A)((typename ARUnsigned<A>::type)a * (typename ARUnsigned<A>::type)b);
}

// Whether a comes strictly before b in a sort: NaNs last in either direction.
template <typename T> __device__ __forceinline__ bool ar_before(int descending, T a, T b) {
    if (b != b) return a == a;
    if (a != a) return false;
    return descending ? b < a : a < b;
}

// Reduce op codes (keep in sync with pymagma.kernels.array_api_reduce.REDUCE): 0 sum, 1 prod, 2 min, 3 max,
// 4 mean, 5 var (divided by n - correction; NaN when that is not positive).  min/max propagate NaN; the caller refuses empty min/max.
template <typename T>
__global__ void ar_reduce(int op, double correction, const T* __restrict__ x, T* __restrict__ y, i64 n_out, i64 n_red,
                          Strides3 s, Strides3 r) {
    typedef typename ARWide<T>::type A;
    for (i64 out = pm_global_index(); out < n_out; out += pm_grid_stride()) {
        i64 base, oy, unused, off, u1, u2;
        pm_offsets(s, out, base, oy, unused);
        A acc = op == 1 ? A(1) : A(0);
        if (op == 2 || op == 3) {
            pm_offsets(r, 0, off, u1, u2);
            T best = x[base + off];
            for (i64 j = 1; j < n_red && best == best; ++j) {
                pm_offsets(r, j, off, u1, u2);
                T v = x[base + off];
                if (v != v || (op == 2 ? v < best : best < v)) best = v;
            }
            y[oy] = best;
            continue;
        }
        for (i64 j = 0; j < n_red; ++j) {
            pm_offsets(r, j, off, u1, u2);
            A v = (A)x[base + off];
            acc = op == 1 ? ar_mul<A>(acc, v) : ar_add<A>(acc, v);
        }
        if constexpr (ARFloat<T>::value) {
            if (op == 4 || op == 5) acc = acc / (A)n_red;
            if (op == 5) {
                A mean = acc, ss = A(0);
                for (i64 j = 0; j < n_red; ++j) {
                    pm_offsets(r, j, off, u1, u2);
                    A d = (A)x[base + off] - mean;
                    ss += d * d;
                }
                A dof = (A)n_red - (A)correction;  // the standard: NaN when N - correction <= 0
                acc = dof > A(0) ? ss / dof : (A)__longlong_as_double(0x7ff8000000000000LL);
            }
        }
        y[oy] = (T)acc;
    }
}

// Index of the largest (want_max) or smallest element along one axis (n_red > 0 elements, stride red_stride):
// the first one on ties; the first NaN wins, as NumPy.
template <typename T>
__global__ void ar_argreduce(int want_max, const T* __restrict__ x, i64* __restrict__ y, i64 n_out, i64 n_red,
                             i64 red_stride, Strides3 s) {
    for (i64 out = pm_global_index(); out < n_out; out += pm_grid_stride()) {
        i64 base, oy, unused;
        pm_offsets(s, out, base, oy, unused);
        T best = x[base];
        i64 at = 0;
        for (i64 j = 1; j < n_red && best == best; ++j) {
            T v = x[base + j * red_stride];
            if (v != v || (want_max ? best < v : v < best)) {
                best = v;
                at = j;
            }
        }
        y[oy] = at;
    }
}

// Inclusive scan (op 0 sum, 1 product) along one axis of n elements; include_initial writes the identity first
// (the output row then has n + 1 elements).
template <typename T>
__global__ void ar_scan(int op, int include_initial, const T* __restrict__ x, T* __restrict__ y, i64 n_rows, i64 n,
                        i64 x_stride, i64 y_stride, Strides3 s) {
    for (i64 row = pm_global_index(); row < n_rows; row += pm_grid_stride()) {
        i64 base, oy, unused;
        pm_offsets(s, row, base, oy, unused);
        T acc = op == 1 ? T(1) : T(0);
        if (include_initial) {
            y[oy] = acc;
            oy += y_stride;
        }
        for (i64 j = 0; j < n; ++j) {
            acc = op == 1 ? ar_mul<T>(acc, x[base + j * x_stride]) : ar_add<T>(acc, x[base + j * x_stride]);
            y[oy + j * y_stride] = acc;
        }
    }
}

// A stable sort of each row (n elements along one axis, stride x_stride) by a bottom-up merge sort of indices in
// scratch (2 n per row); writes the sorted values and/or their indices (either pointer may be null).
template <typename T>
__global__ void ar_sort(int descending, const T* __restrict__ x, T* __restrict__ values, i64* __restrict__ indices,
                        i64* __restrict__ scratch, i64 n_rows, i64 n, i64 x_stride, i64 out_stride, Strides3 s) {
    for (i64 row = pm_global_index(); row < n_rows; row += pm_grid_stride()) {
        i64 base, oo, unused;
        pm_offsets(s, row, base, oo, unused);
        i64* a = scratch + row * 2 * n;
        i64* b = a + n;
        for (i64 i = 0; i < n; ++i) a[i] = i;
        for (i64 width = 1; width < n; width *= 2) {
            for (i64 lo = 0; lo < n; lo += 2 * width) {
                i64 mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
                i64 i = lo, j = mid, k = lo;
                while (i < mid && j < hi) {
                    if (ar_before<T>(descending, x[base + a[j] * x_stride], x[base + a[i] * x_stride])) b[k++] = a[j++];
                    else b[k++] = a[i++];
                }
                while (i < mid) b[k++] = a[i++];
                while (j < hi) b[k++] = a[j++];
            }
            i64* t = a;
            a = b;
            b = t;
        }
        for (i64 i = 0; i < n; ++i) {
            if (values) values[oo + i * out_stride] = x[base + a[i] * x_stride];
            if (indices) indices[oo + i * out_stride] = a[i];
        }
    }
}

// y[i] (C order) = c[s.s0] ? a[s.s1] : b[s.s2] over the broadcast shape s.shape.
template <typename T>
__global__ void ar_where(const bool* __restrict__ c, const T* __restrict__ a, const T* __restrict__ b,
                         T* __restrict__ y, i64 n, Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 oc, oa, ob;
        pm_offsets(s, i, oc, oa, ob);
        y[i] = c[oc] ? a[oa] : b[ob];
    }
}

// y[i] (C order over x2's shape) = where x2[s.s0] goes in the sorted x1 (n1 elements, stride1; NaNs last):
// the first such index (right = 0) or the last (right = 1).
template <typename T>
__global__ void ar_searchsorted(int right, const T* __restrict__ x1, i64 n1, i64 stride1, const T* __restrict__ x2,
                                i64* __restrict__ y, i64 n2, Strides3 s) {
    for (i64 i = pm_global_index(); i < n2; i += pm_grid_stride()) {
        i64 o, u1, u2;
        pm_offsets(s, i, o, u1, u2);
        T v = x2[o];
        i64 lo = 0, hi = n1;
        while (lo < hi) {
            i64 mid = lo + (hi - lo) / 2;
            T m = x1[mid * stride1];
            if (right ? !ar_before<T>(0, v, m) : ar_before<T>(0, m, v)) lo = mid + 1;
            else hi = mid;
        }
        y[i] = lo;
    }
}

// y[i] = x[idx[i * idx_stride] * x_stride]: a 1-D gather.
template <typename T>
__global__ void ar_take(const T* __restrict__ x, i64 x_stride, const i64* __restrict__ idx, i64 idx_stride,
                        T* __restrict__ y, i64 n) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) y[i] = x[idx[i * idx_stride] * x_stride];
}

// The coordinates of the true flags (C order over s.shape): csum is the inclusive count of true flags, out holds
// ndim rows of count entries.
template <typename F>
__global__ void ar_nonzero(const F* __restrict__ flags, const i64* __restrict__ csum, i64 n, i64 count,
                           i64* __restrict__ out, Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        if (!flags[i]) continue;
        i64 pos = csum[i] - 1, rest = i;
        for (int d = s.ndim - 1; d >= 0; --d) {
            out[d * count + pos] = rest % s.shape[d];
            rest /= s.shape[d];
        }
    }
}

// flags[i] = 1 where the sorted values start a new group (NaN != NaN: each NaN is its own group).
template <typename T>
__global__ void ar_unique_flags(const T* __restrict__ sorted, i64 n, i64* __restrict__ flags) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) flags[i] = (i == 0 || !(sorted[i] == sorted[i - 1]));
}

// From the stably sorted values, their original positions (perm) and the inclusive group count (csum): the unique
// values, the first index of each, the counts and the inverse (any output pointer but values may be null).
template <typename T>
__global__ void ar_unique(const T* __restrict__ sorted, const i64* __restrict__ perm, const i64* __restrict__ csum,
                          i64 n, T* __restrict__ values, i64* __restrict__ index, i64* __restrict__ counts,
                          i64* __restrict__ inverse) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 g = csum[i] - 1;
        if (inverse) inverse[perm[i]] = g;
        if (i > 0 && csum[i] == csum[i - 1]) continue;
        values[g] = sorted[i];
        if (index) index[g] = perm[i];
        if (counts) {
            i64 j = i + 1;
            while (j < n && csum[j] == csum[i]) ++j;
            counts[g] = j - i;
        }
    }
}

// The array API standard's elementwise kernels: one binary family (arithmetic, comparison) and one unary family,
// each reading strided, broadcast operands (Strides3: shape and element strides of up to PM_MAX_DIMS dims) and
// writing a C-contiguous result, plus a strided cast between every pair of the standard's real dtypes.
// The operation is a runtime code uniform over the launch (pymagma.kernels.array_api holds the tables), so each
// kernel is instantiated once per dtype; integers compute in their own type (wrapping like NumPy), half types in
// float32 through Traits, bool is C++ bool.
#include "common.cuh"

#ifdef PM_HOST_EMULATION
using std::ceil;
using std::floor;
using std::fmod;
using std::trunc;
using std::rint;
using std::sin;
using std::cos;
using std::tan;
using std::log2;
using std::log10;
using std::acos;
using std::acosh;
using std::asin;
using std::asinh;
using std::atan;
using std::atan2;
using std::atanh;
using std::cosh;
using std::sinh;
using std::copysign;
using std::hypot;
using std::fabs;
#endif

template <typename T> struct AAIsFloat { static const bool value = false; };
template <> struct AAIsFloat<float> { static const bool value = true; };
template <> struct AAIsFloat<double> { static const bool value = true; };
template <typename T> struct AAUnsigned { typedef T type; };
template <> struct AAUnsigned<signed char> { typedef unsigned char type; };
// 16-bit integers wrap in 32 bits (unsigned short * unsigned short promotes to int, which may overflow)
template <> struct AAUnsigned<short> { typedef u32 type; };
template <> struct AAUnsigned<unsigned short> { typedef u32 type; };
template <> struct AAUnsigned<int> { typedef unsigned int type; };
template <> struct AAUnsigned<i64> { typedef u64 type; };

// NumPy's floor division and remainder of floats (npy_divmod): the remainder has the divisor's sign.
template <typename A> __device__ __forceinline__ A aa_fdivmod(A a, A b, A* rem) {
    A mod = fmod(a, b);
    if (b == A(0)) {
        *rem = mod;
        return a / b;
    }
    A div = (a - mod) / b;
    if (mod != A(0)) {
        if ((b < A(0)) != (mod < A(0))) {
            mod += b;
            div -= A(1);
        }
    } else {
        mod = b < A(0) ? -A(0) : A(0);
    }
    *rem = mod;
    A floordiv;
    if (div != A(0)) {
        floordiv = floor(div);
        if (div - floordiv > A(0.5)) floordiv += A(1);
    } else {
        floordiv = (a / b) < A(0) ? -A(0) : A(0);
    }
    return floordiv;
}

// Binary op codes (keep in sync with pymagma.kernels.array_api.BINARY).
template <typename T> __device__ __forceinline__ T aa_binary_op(int op, T a, T b) {
    if constexpr (AAIsFloat<T>::value) {
        T r;
        switch (op) {
            case 0: return a + b;
            case 1: return a - b;
            case 2: return a * b;
            case 3: return a / b;
            case 4:  // infinities, NaN and zero dividends: floor(a / b), the standard's special cases
                if (!(a - a == T(0)) || !(b - b == T(0)) || a == T(0)) return floor(a / b);
                return aa_fdivmod(a, b, &r);
            case 5: aa_fdivmod(a, b, &r); return r;
            case 6: return pow(a, b);
            case 7: return (a != a || a > b) ? a : b;  // maximum: NaN propagates
            case 8: return (a != a || a < b) ? a : b;  // minimum
            case 17: return atan2(a, b);
            case 18: return copysign(a, b);
            case 19: return hypot(a, b);
            case 20: {  // logaddexp: log(exp(a) + exp(b)) without overflow
                if (a != a || b != b) return a + b;
                if (a == b) return a + T(0.6931471805599453);  // also both infinite
                return (a > b ? a : b) + log1p(exp(-fabs(a - b)));
            }
            case 21:  // nextafter
                if constexpr (sizeof(T) == 4) return nextafterf(a, b); else return nextafter(a, b);
            default: return a;
        }
    } else if constexpr (sizeof(T) == 1 && T(-1) > T(0) && T(2) == T(1)) {  // bool
        switch (op) {
            case 7: case 10: case 13: return a || b;  // maximum, logical_or, bitwise_or
            case 8: case 9: case 12: return a && b;   // minimum, logical_and, bitwise_and
            case 11: case 14: return a != b;          // logical_xor, bitwise_xor
            default: return a;
        }
    } else {
        typedef typename AAUnsigned<T>::type U;
        switch (op) {
            case 0: return (T)((U)a + (U)b);
            case 1: return (T)((U)a - (U)b);
            case 2: return (T)((U)a * (U)b);
            case 4: {  // floor division; x // 0 is 0, as NumPy
                if (b == T(0)) return T(0);
                if (T(-1) < T(0) && b == T(-1)) return (T)((U)0 - (U)a);
                T q = a / b;
                return ((a % b) != T(0) && ((a < T(0)) != (b < T(0)))) ? T(q - 1) : q;
            }
            case 5: {  // remainder with the divisor's sign; x % 0 is 0
                if (b == T(0) || (T(-1) < T(0) && b == T(-1))) return T(0);
                T m = a % b;
                return (m != T(0) && ((m < T(0)) != (b < T(0)))) ? T(m + b) : m;
            }
            case 6: {  // integer power by squaring (b >= 0: the namespace refuses negative exponents)
                U base = (U)a, result = 1;
                for (T e = b; e > T(0); e = T(e >> 1)) {
                    if (e & T(1)) result = (U)(result * base);
                    base = (U)(base * base);
                }
                return (T)result;
            }
            case 7: return a > b ? a : b;
            case 8: return a < b ? a : b;
            case 12: return T(a & b);
            case 13: return T(a | b);
            case 14: return T(a ^ b);
            case 15: return (b < T(0) || b >= T(8 * sizeof(T))) ? T(0) : T((U)a << b);  // left_shift
            case 16: return (b < T(0) || b >= T(8 * sizeof(T))) ? T(a < T(0) ? -1 : 0) : T(a >> b);    // right_shift
            default: return a;
        }
    }
}

// Comparison codes (keep in sync with pymagma.kernels.array_api.COMPARE).
template <typename T> __device__ __forceinline__ bool aa_compare_op(int op, T a, T b) {
    switch (op) {
        case 0: return a == b;
        case 1: return a != b;
        case 2: return a < b;
        case 3: return a <= b;
        case 4: return a > b;
        case 5: return a >= b;
        default: return false;
    }
}

// Unary codes (keep in sync with pymagma.kernels.array_api.UNARY).
template <typename T> __device__ __forceinline__ T aa_unary_op(int op, T x) {
    if constexpr (AAIsFloat<T>::value) {
        switch (op) {
            case 0: return -x;
            case 1: return x;
            case 2: return x < T(0) ? -x : (x == T(0) ? T(0) : x);
            case 3: return x * x;
            case 4: return sqrt(x);
            case 5: return exp(x);
            case 6: return log(x);
            case 7: return expm1(x);
            case 8: return log1p(x);
            case 9: return log2(x);
            case 10: return log10(x);
            case 11: return sin(x);
            case 12: return cos(x);
            case 13: return tan(x);
            case 14: return tanh(x);
            case 15: return floor(x);
            case 16: return ceil(x);
            case 17: return trunc(x);
            case 18: return rint(x);
            case 19: return x > T(0) ? T(1) : (x < T(0) ? T(-1) : (x == T(0) ? T(0) : x));  // sign, NaN stays
            case 20: return T(1) / x;
            case 23: return acos(x);
            case 24: return acosh(x);
            case 25: return asin(x);
            case 26: return asinh(x);
            case 27: return atan(x);
            case 28: return atanh(x);
            case 29: return cosh(x);
            case 30: return sinh(x);
            default: return x;
        }
    } else if constexpr (sizeof(T) == 1 && T(-1) > T(0) && T(2) == T(1)) {  // bool
        switch (op) {
            case 21: case 22: return !x;  // logical_not, bitwise_invert
            default: return x;
        }
    } else {
        typedef typename AAUnsigned<T>::type U;
        switch (op) {
            case 0: return (T)((U)0 - (U)x);
            case 2: return x < T(0) ? (T)((U)0 - (U)x) : x;
            case 3: return (T)((U)x * (U)x);
            case 19: return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
            case 22: return T(~x);
            default: return x;  // positive, floor, ceil, trunc, round of integers
        }
    }
}

// Float tests, bool results (keep in sync with pymagma.kernels.array_api.TESTS).
template <typename T> __device__ __forceinline__ bool aa_test_op(int op, T x) {
    switch (op) {
        case 0: return x != x;                                    // isnan
        case 1: return x - x != x - x && x == x;                  // isinf
        case 2: return x - x == x - x;                            // isfinite
        case 3:  // signbit: the sign bit itself (of -0.0 and -NaN too)
            if constexpr (sizeof(T) == 4) return (__float_as_uint(x) >> 31) != 0u;
            else return __double_as_longlong(x) < 0;
        default: return false;
    }
}

// y[i] (C order) = a[s.s0] op b[s.s1] over the broadcast shape s.shape.
template <typename T>
__global__ void aa_binary(int op, const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, i64 n,
                          Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 oa, ob, unused;
        pm_offsets(s, i, oa, ob, unused);
        y[i] = aa_binary_op<T>(op, a[oa], b[ob]);
    }
}

template <typename T>
__global__ void aa_compare(int op, const T* __restrict__ a, const T* __restrict__ b, bool* __restrict__ y, i64 n,
                           Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 oa, ob, unused;
        pm_offsets(s, i, oa, ob, unused);
        y[i] = aa_compare_op<T>(op, a[oa], b[ob]);
    }
}

// y[i] (C order) = op(x[s.s0]).
template <typename T>
__global__ void aa_unary(int op, const T* __restrict__ x, T* __restrict__ y, i64 n, Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 ox, unused0, unused1;
        pm_offsets(s, i, ox, unused0, unused1);
        y[i] = aa_unary_op<T>(op, x[ox]);
    }
}

template <typename T>
__global__ void aa_test(int op, const T* __restrict__ x, bool* __restrict__ y, i64 n, Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 ox, unused0, unused1;
        pm_offsets(s, i, ox, unused0, unused1);
        y[i] = aa_test_op<T>(op, x[ox]);
    }
}

// y[i] (C order) = (D) x[s.s0]: C++ conversions (to bool: x != 0; integers wrap, as NumPy's astype).
template <typename S, typename D>
__global__ void aa_cast(const S* __restrict__ x, D* __restrict__ y, i64 n, Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 ox, unused0, unused1;
        pm_offsets(s, i, ox, unused0, unused1);
        y[i] = (D)x[ox];
    }
}

// ---------------------------------------------------------------------------------------------- manipulation
// y[s.s1] = x[s.s0] over s.shape: a strided (broadcast) source into a strided destination of one dtype.
template <typename T>
__global__ void aa_assign(const T* __restrict__ x, T* __restrict__ y, i64 n, Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 ox, oy, unused;
        pm_offsets(s, i, ox, oy, unused);
        y[oy] = x[ox];
    }
}

// tril (upper = 0) or triu (upper = 1) of the stack of cols-wide matrices: y[i] (C order) = x[s.s0] on the kept
// diagonals, 0 elsewhere.
template <typename T>
__global__ void aa_tri(const T* __restrict__ x, T* __restrict__ y, i64 n, Strides3 s, i64 rows, i64 cols, i64 k,
                       int upper) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 ox, unused0, unused1;
        pm_offsets(s, i, ox, unused0, unused1);
        i64 d = i % cols - (i / cols) % rows;
        y[i] = (upper ? d >= k : d <= k) ? x[ox] : T(0);
    }
}

// ---------------------------------------------------------------------------------------------- indexing
// Element offsets of integer indices along one axis of length len and element stride stride: off[i] (C order)
// (+)= idx[s.s0] * stride, a negative index counted from the end; out-of-range indices are clamped into the axis
// (the standard leaves them unspecified; no read outside the array).
template <typename I>
__global__ void aa_index_offsets(const I* __restrict__ idx, i64* __restrict__ off, i64 n, Strides3 s, i64 len,
                                 i64 stride, int accumulate) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 oi, unused0, unused1;
        pm_offsets(s, i, oi, unused0, unused1);
        i64 v = (i64)idx[oi];
        if (v < 0) v += len;
        v = v < 0 ? 0 : (v >= len ? len - 1 : v);
        off[i] = (accumulate ? off[i] : 0) + v * stride;
    }
}

// Gather y[s.s2] = x[s.s0 + off[s.s1]], or (scatter) x[s.s0 + off[s.s1]] = y[s.s2].
template <typename T>
__global__ void aa_gather(T* __restrict__ x, const i64* __restrict__ off, T* __restrict__ y, i64 n, Strides3 s,
                          int scatter) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 ox, oo, oy;
        pm_offsets(s, i, ox, oo, oy);
        if (scatter) x[ox + off[oo]] = y[oy]; else y[oy] = x[ox + off[oo]];
    }
}

// Boolean masks, in three steps over `chunks` consecutive runs (C order) of `chunk` mask elements: count the true
// elements of each run, scan the counts (one thread; the total lands in counts[chunks]), then give each true
// element its position in the compacted order (false ones -1).
template <typename M>
__global__ void aa_mask_count(const M* __restrict__ m, i64* __restrict__ counts, i64 n, i64 chunk, i64 chunks,
                              Strides3 s) {
    for (i64 c = pm_global_index(); c < chunks; c += pm_grid_stride()) {
        i64 total = 0, end = (c + 1) * chunk < n ? (c + 1) * chunk : n;
        for (i64 i = c * chunk; i < end; ++i) {
            i64 om, unused0, unused1;
            pm_offsets(s, i, om, unused0, unused1);
            total += m[om] ? 1 : 0;
        }
        counts[c] = total;
    }
}

template <typename I>
__global__ void aa_mask_scan(I* __restrict__ counts, I chunks) {
    if (pm_global_index() == 0) {
        I run = 0;
        for (I c = 0; c < chunks; ++c) {
            I v = counts[c];
            counts[c] = run;
            run += v;
        }
        counts[chunks] = run;
    }
}

template <typename M>
__global__ void aa_mask_positions(const M* __restrict__ m, const i64* __restrict__ counts, i64* __restrict__ pos,
                                  i64 n, i64 chunk, i64 chunks, Strides3 s) {
    for (i64 c = pm_global_index(); c < chunks; c += pm_grid_stride()) {
        i64 run = counts[c], end = (c + 1) * chunk < n ? (c + 1) * chunk : n;
        for (i64 i = c * chunk; i < end; ++i) {
            i64 om, unused0, unused1;
            pm_offsets(s, i, om, unused0, unused1);
            pos[i] = m[om] ? run++ : -1;
        }
    }
}

// Over the mask's shape followed by the `inner` trailing elements: y[pos * inner + r] = x[s.s0] (take), or
// (put) x[s.s0] = y[pos * row + r] (row 0: one value row broadcast), for the true elements (pos[s.s1] >= 0).
template <typename T>
__global__ void aa_mask_move(T* __restrict__ x, const i64* __restrict__ pos, T* __restrict__ y, i64 n, i64 inner,
                             i64 row, Strides3 s, int put) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 ox, op, unused;
        pm_offsets(s, i, ox, op, unused);
        i64 p = pos[op];
        if (p < 0) continue;
        if (put) x[ox] = y[p * row + i % inner]; else y[p * inner + i % inner] = x[ox];
    }
}

// The array API standard's elementwise kernels: one binary family (arithmetic, comparison) and one unary family,
// each reading strided, broadcast operands (Strides3: shape and element strides of up to PM_MAX_DIMS dims) and
// writing a C-contiguous result, plus a strided cast between every pair of the standard's real dtypes.
// The operation is a runtime code uniform over the launch (pymagma.array_api._kernels holds the tables), so each
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
#endif

template <typename T> struct AAIsFloat { static const bool value = false; };
template <> struct AAIsFloat<float> { static const bool value = true; };
template <> struct AAIsFloat<double> { static const bool value = true; };
template <typename T> struct AAUnsigned { typedef T type; };
template <> struct AAUnsigned<signed char> { typedef unsigned char type; };
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

// Binary op codes (keep in sync with pymagma.array_api._kernels.BINARY).
template <typename T> __device__ __forceinline__ T aa_binary_op(int op, T a, T b) {
    if constexpr (AAIsFloat<T>::value) {
        T r;
        switch (op) {
            case 0: return a + b;
            case 1: return a - b;
            case 2: return a * b;
            case 3: return a / b;
            case 4: return aa_fdivmod(a, b, &r);
            case 5: aa_fdivmod(a, b, &r); return r;
            case 6: return pow(a, b);
            case 7: return (a != a || a > b) ? a : b;  // maximum: NaN propagates
            case 8: return (a != a || a < b) ? a : b;  // minimum
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

// Comparison codes (keep in sync with pymagma.array_api._kernels.COMPARE).
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

// Unary codes (keep in sync with pymagma.array_api._kernels.UNARY).
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

// Float tests, bool results (keep in sync with pymagma.array_api._kernels.TESTS).
template <typename T> __device__ __forceinline__ bool aa_test_op(int op, T x) {
    switch (op) {
        case 0: return x != x;                                    // isnan
        case 1: return x - x != x - x && x == x;                  // isinf
        case 2: return x - x == x - x;                            // isfinite
        case 3: return x < T(0) || (x == T(0) && T(1) / x < T(0));  // signbit (not of NaN)
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

// The array API standard's complex64 and complex128 (pymagma.array_api): elementwise arithmetic and functions with
// the standard's complex special cases (C99 Annex G: branch cuts, infinities, NaNs, signed zeros), the casts to and
// from complex, complex parts and tests, and the complex instantiations of the array API's data-movement kernels
// (assign, tri, gather, mask_move, where), of its reductions and scans (sum, prod; mean divides a sum) and of the
// sort and group kernels of unique_*.
// A complex number is cx<R> {re, im} (NumPy's layout); sums of complex64 accumulate in complex128.
#include "array_api.cu"
#include "array_api_reduce.cu"

template <typename R> struct cx {
    R re, im;
    __device__ __forceinline__ cx() : re(0), im(0) {}
    __device__ __forceinline__ cx(R r) : re(r), im(0) {}
    __device__ __forceinline__ cx(R r, R i) : re(r), im(i) {}
    template <typename S> __device__ __forceinline__ explicit cx(const cx<S>& o) : re((R)o.re), im((R)o.im) {}
};
template <typename R> __device__ __forceinline__ cx<R> operator+(cx<R> a, cx<R> b) { return cx<R>(a.re + b.re, a.im + b.im); }
template <typename R> __device__ __forceinline__ cx<R> operator-(cx<R> a, cx<R> b) { return cx<R>(a.re - b.re, a.im - b.im); }
template <typename R> __device__ __forceinline__ cx<R> operator*(cx<R> a, cx<R> b) {
    return cx<R>(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}
template <typename R> __device__ __forceinline__ cx<R> operator/(cx<R> a, R b) { return cx<R>(a.re / b, a.im / b); }
template <typename R> __device__ __forceinline__ bool operator==(cx<R> a, cx<R> b) { return a.re == b.re && a.im == b.im; }
template <typename R> __device__ __forceinline__ bool operator!=(cx<R> a, cx<R> b) { return !(a == b); }
// NumPy's lexicographic order (real part first), for the sort inside unique_* only: the namespace's sort, min, max
// refuse complex numbers as the standard does.  A NaN in either part makes the number NaN (a != a): sorted last.
template <typename R> __device__ __forceinline__ bool operator<(cx<R> a, cx<R> b) {
    return a.re < b.re || (a.re == b.re && a.im < b.im);
}
template <> struct ARWide<cx<float>> { typedef cx<double> type; };

template <typename R> __device__ __forceinline__ bool cx_nan(R x) { return x != x; }
template <typename R> __device__ __forceinline__ bool cx_inf(R x) { return x == x && x - x != x - x; }
template <typename R> __device__ __forceinline__ bool cx_fin(R x) { return x - x == x - x; }
template <typename R> __device__ __forceinline__ R cx_pi() { return R(3.14159265358979323846); }
template <typename R> __device__ __forceinline__ R cx_nanv() { return R(__longlong_as_double(0x7ff8000000000000LL)); }
template <typename R> __device__ __forceinline__ R cx_infv() { return R(pm_inf()); }
template <typename R> __device__ __forceinline__ cx<R> cx_mul_i(cx<R> z) { return cx<R>(-z.im, z.re); }    // i z
template <typename R> __device__ __forceinline__ cx<R> cx_mul_mi(cx<R> z) { return cx<R>(z.im, -z.re); }  // -i z

// a / b by Smith's algorithm with the C99 Annex G recovery of infinities and zeros; a zero b as NumPy divides.
template <typename R> __device__ cx<R> cx_div(cx<R> a, cx<R> b) {
    R c = b.re, d = b.im, x, y;
    if (fabs(c) >= fabs(d)) {
        if (c == R(0) && d == R(0)) {  // as NumPy: each part over |b| (a signed zero divisor gives no sign)
            x = a.re / fabs(c);
            y = a.im / fabs(c);
            if (a.re == R(0) && a.im == R(0)) x = y = cx_nanv<R>();
            return cx<R>(x, y);
        }
        R r = d / c, den = c + d * r;
        x = (a.re + a.im * r) / den;
        y = (a.im - a.re * r) / den;
    } else {
        R r = c / d, den = c * r + d;
        x = (a.re * r + a.im) / den;
        y = (a.im * r - a.re) / den;
    }
    if (cx_nan(x) && cx_nan(y)) {
        R ar = a.re, ai = a.im;
        if ((cx_inf(ar) || cx_inf(ai)) && cx_fin(c) && cx_fin(d)) {
            ar = copysign(cx_inf(ar) ? R(1) : R(0), ar);
            ai = copysign(cx_inf(ai) ? R(1) : R(0), ai);
            x = cx_infv<R>() * (ar * c + ai * d);
            y = cx_infv<R>() * (ai * c - ar * d);
        } else if ((cx_inf(c) || cx_inf(d)) && cx_fin(ar) && cx_fin(ai)) {
            c = copysign(cx_inf(c) ? R(1) : R(0), c);
            d = copysign(cx_inf(d) ? R(1) : R(0), d);
            x = R(0) * (ar * c + ai * d);
            y = R(0) * (ai * c - ar * d);
        }
    }
    return cx<R>(x, y);
}

// a * b with the C99 Annex G recovery of infinities (an infinite factor times a nonzero one is infinite).
template <typename R> __device__ cx<R> cx_mul(cx<R> p, cx<R> q) {
    R a = p.re, b = p.im, c = q.re, d = q.im;
    R ac = a * c, bd = b * d, ad = a * d, bc = b * c, x = ac - bd, y = ad + bc;
    if (cx_nan(x) && cx_nan(y)) {
        bool recalc = false;
        if (cx_inf(a) || cx_inf(b)) {
            a = copysign(cx_inf(a) ? R(1) : R(0), a);
            b = copysign(cx_inf(b) ? R(1) : R(0), b);
            if (cx_nan(c)) c = copysign(R(0), c);
            if (cx_nan(d)) d = copysign(R(0), d);
            recalc = true;
        }
        if (cx_inf(c) || cx_inf(d)) {
            c = copysign(cx_inf(c) ? R(1) : R(0), c);
            d = copysign(cx_inf(d) ? R(1) : R(0), d);
            if (cx_nan(a)) a = copysign(R(0), a);
            if (cx_nan(b)) b = copysign(R(0), b);
            recalc = true;
        }
        if (!recalc && (cx_inf(ac) || cx_inf(bd) || cx_inf(ad) || cx_inf(bc))) {
            if (cx_nan(a)) a = copysign(R(0), a);
            if (cx_nan(b)) b = copysign(R(0), b);
            if (cx_nan(c)) c = copysign(R(0), c);
            if (cx_nan(d)) d = copysign(R(0), d);
            recalc = true;
        }
        if (recalc) {
            x = cx_infv<R>() * (a * c - b * d);
            y = cx_infv<R>() * (a * d + b * c);
        }
    }
    return cx<R>(x, y);
}

template <typename R> __device__ cx<R> cx_exp(cx<R> z) {
    R a = z.re, b = z.im;
    if (b == R(0)) return cx<R>(exp(a), b);
    if (cx_inf(a)) {
        if (a < R(0)) return cx_fin(b) ? cx<R>(R(0) * cos(b), R(0) * sin(b)) : cx<R>(R(0), R(0));
        return cx_fin(b) ? cx<R>(a * cos(b), a * sin(b)) : cx<R>(a, cx_nanv<R>());
    }
    if (cx_nan(a) || !cx_fin(b)) return cx<R>(cx_nanv<R>(), cx_nanv<R>());
    R e = exp(a);
    if (cx_inf(e)) {  // exp(a) overflows where e * cos(b) may not: split the exponent
        R h = exp(a * R(0.5));
        return cx<R>(h * cos(b) * h, h * sin(b) * h);
    }
    return cx<R>(e * cos(b), e * sin(b));
}

// log|z| accurately near |z| = 1 (hypot overflow- and underflow-free)
template <typename R> __device__ R cx_log_abs(R a, R b) {
    R h = hypot(a, b);
    if (cx_fin(h) && h > R(0.5) && h < R(2)) {
        R big = fabs(a) > fabs(b) ? fabs(a) : fabs(b), small = fabs(a) > fabs(b) ? fabs(b) : fabs(a);
        return R(0.5) * log1p((big - R(1)) * (big + R(1)) + small * small);
    }
    return log(h);
}

template <typename R> __device__ cx<R> cx_log(cx<R> z) { return cx<R>(cx_log_abs(z.re, z.im), atan2(z.im, z.re)); }

template <typename R> __device__ cx<R> cx_log1p(cx<R> z) {
    R a = z.re, b = z.im;
    if (cx_fin(a) && cx_fin(b) && fabs(a) < R(0.5) && fabs(b) < R(0.5))  // log|1 + z| without cancellation
        return cx<R>(R(0.5) * log1p(a * (R(2) + a) + b * b), atan2(b, R(1) + a));
    return cx_log(cx<R>(R(1) + a, b));
}

template <typename R> __device__ cx<R> cx_sqrt(cx<R> z) {
    R a = z.re, b = z.im;
    if (a == R(0) && b == R(0)) return cx<R>(R(0), b);
    if (cx_inf(b)) return cx<R>(cx_infv<R>(), b);
    if (cx_nan(a)) return cx<R>(a, cx_nanv<R>());
    if (cx_inf(a)) {
        if (a < R(0)) return cx<R>(cx_nan(b) ? cx_nanv<R>() : R(0), copysign(cx_infv<R>(), b));
        return cx<R>(a, cx_nan(b) ? b : copysign(R(0), b));
    }
    if (cx_nan(b)) return cx<R>(cx_nanv<R>(), cx_nanv<R>());
    R scale = R(1);
    R big = R(sizeof(R) == 4 ? 1e37 : 1e307);
    if (fabs(a) > big || fabs(b) > big) { a *= R(0.25); b *= R(0.25); scale = R(2); }
    else if (fabs(a) < R(1) / big && fabs(b) < R(1) / big) { a *= R(4) * big; b *= R(4) * big; scale = R(0.5) / sqrt(big); }
    R t = sqrt((fabs(a) + hypot(a, b)) * R(0.5));
    cx<R> r = a >= R(0) ? cx<R>(t, b / (R(2) * t)) : cx<R>(fabs(b) / (R(2) * t), copysign(t, b));
    return cx<R>(r.re * scale, r.im * scale);
}

template <typename R> __device__ cx<R> cx_sinh(cx<R> z) {
    R a = z.re, b = z.im;
    if (cx_fin(a) && cx_fin(b)) {
        if (b == R(0)) return cx<R>(sinh(a), b);
        return cx<R>(sinh(a) * cos(b), cosh(a) * sin(b));
    }
    if (a == R(0)) return cx<R>(a, cx_nanv<R>());                   // b infinite or NaN
    if (b == R(0)) return cx<R>(a, b);                              // a infinite or NaN
    if (cx_inf(a)) return cx_fin(b) ? cx<R>(a * cos(b), fabs(a) * sin(b)) : cx<R>(a, cx_nanv<R>());
    return cx<R>(cx_nanv<R>(), cx_nanv<R>());
}

template <typename R> __device__ cx<R> cx_cosh(cx<R> z) {
    R a = z.re, b = z.im;
    if (cx_fin(a) && cx_fin(b)) {
        if (b == R(0)) return cx<R>(cosh(a), a * b == R(0) ? copysign(R(0), a) * copysign(R(1), b) : b);
        return cx<R>(cosh(a) * cos(b), sinh(a) * sin(b));
    }
    if (a == R(0)) return cx<R>(cx_nanv<R>(), R(0));                // b infinite or NaN
    if (b == R(0)) return cx<R>(fabs(a), cx_nan(a) ? b : copysign(R(0), a) * copysign(R(1), b));
    if (cx_inf(a)) return cx_fin(b) ? cx<R>(fabs(a) * cos(b), a * sin(b)) : cx<R>(fabs(a), cx_nanv<R>());
    return cx<R>(cx_nanv<R>(), cx_nanv<R>());
}

template <typename R> __device__ cx<R> cx_tanh(cx<R> z) {
    R a = z.re, b = z.im;
    if (!cx_fin(a)) {
        if (cx_nan(a)) return cx<R>(a, b == R(0) ? b : cx_nanv<R>());
        return cx<R>(copysign(R(1), a), copysign(R(0), cx_fin(b) ? b : R(1)));  // the standard: 1 + 0j for b > 0
    }
    if (!cx_fin(b)) return a == R(0) ? cx<R>(a, cx_nanv<R>()) : cx<R>(cx_nanv<R>(), cx_nanv<R>());
    if (fabs(a) >= R(sizeof(R) == 4 ? 9 : 22)) {
        R e = exp(R(-2) * fabs(a));
        return cx<R>(copysign(R(1), a), R(4) * sin(b) * cos(b) * e);
    }
    R t = tan(b), beta = R(1) + t * t, s = sinh(a), rho = sqrt(R(1) + s * s), den = R(1) + beta * s * s;
    return cx<R>(beta * rho * s / den, t / den);
}

// asinh for re(z) >= 0 (odd symmetry gives the rest): log(z + sqrt(z^2 + 1)), large |z| as log(2z).
template <typename R> __device__ cx<R> cx_asinh_pos(cx<R> z) {
    R a = z.re, b = z.im;
    if (fabs(a) > R(sizeof(R) == 4 ? 1e18 : 1e150) || fabs(b) > R(sizeof(R) == 4 ? 1e18 : 1e150)) {
        cx<R> l = cx_log(z);
        return cx<R>(l.re + R(0.69314718055994530942), l.im);
    }
    cx<R> w = cx_sqrt(cx<R>((a - b) * (a + b) + R(1), R(2) * a * b));
    cx<R> s = cx<R>(a + w.re, b + w.im);
    if (fabs(a) < R(0.5) && fabs(b) < R(0.5)) return cx_log1p(cx<R>(s.re - R(1), s.im));
    return cx_log(s);
}

template <typename R> __device__ cx<R> cx_asinh(cx<R> z) {
    R a = z.re, b = z.im;
    if (cx_nan(a)) {
        if (b == R(0)) return cx<R>(a, b);
        if (cx_inf(b)) return cx<R>(cx_infv<R>(), a);
        return cx<R>(a, cx_nanv<R>());
    }
    if (cx_nan(b)) return cx_inf(a) ? cx<R>(a, b) : cx<R>(cx_nanv<R>(), cx_nanv<R>());
    if (cx_inf(a) || cx_inf(b)) {
        R im = cx_inf(a) ? (cx_inf(b) ? cx_pi<R>() / R(4) : R(0)) : cx_pi<R>() / R(2);
        return cx<R>(copysign(cx_infv<R>(), a), copysign(im, b));
    }
    bool neg = a < R(0) || (a == R(0) && copysign(R(1), a) < R(0));
    cx<R> r = cx_asinh_pos(cx<R>(fabs(a), neg ? -b : b));
    return neg ? cx<R>(-r.re, -r.im) : r;
}

template <typename R> __device__ cx<R> cx_acosh(cx<R> z) {
    R a = z.re, b = z.im;
    if (cx_nan(a)) return cx_inf(b) ? cx<R>(cx_infv<R>(), a) : cx<R>(a, cx_nanv<R>());
    if (cx_nan(b)) return cx_inf(a) ? cx<R>(cx_infv<R>(), b) : cx<R>(cx_nanv<R>(), a == R(0) ? copysign(cx_pi<R>() / R(2), b) : b);
    if (cx_inf(a) || cx_inf(b)) {
        R im = cx_inf(b) ? (cx_inf(a) ? (a > R(0) ? cx_pi<R>() / R(4) : R(3) * cx_pi<R>() / R(4)) : cx_pi<R>() / R(2))
                         : (a > R(0) ? R(0) : cx_pi<R>());
        return cx<R>(cx_infv<R>(), copysign(im, b));
    }
    // log(z + sqrt(z + 1) sqrt(z - 1)) (Kahan's branch cuts), large |z| as log(2z)
    if (fabs(a) > R(sizeof(R) == 4 ? 1e18 : 1e150) || fabs(b) > R(sizeof(R) == 4 ? 1e18 : 1e150)) {
        cx<R> l = cx_log(z);
        return cx<R>(l.re + R(0.69314718055994530942), l.im);
    }
    cx<R> p = cx_sqrt(cx<R>(a + R(1), b)), m = cx_sqrt(cx<R>(a - R(1), b));
    cx<R> r = cx_log(cx<R>(a + (p.re * m.re - p.im * m.im), b + (p.re * m.im + p.im * m.re)));
    return cx<R>(fabs(r.re), copysign(fabs(r.im), b));
}

template <typename R> __device__ cx<R> cx_atanh(cx<R> z) {
    R a = z.re, b = z.im;
    if (cx_nan(a)) return cx_inf(b) ? cx<R>(R(0), copysign(cx_pi<R>() / R(2), b)) : cx<R>(a, cx_nanv<R>());
    if (cx_nan(b)) return (a == R(0) || cx_inf(a)) ? cx<R>(copysign(R(0), a), b) : cx<R>(cx_nanv<R>(), cx_nanv<R>());
    if (cx_inf(a) || cx_inf(b)) return cx<R>(copysign(R(0), a), copysign(cx_pi<R>() / R(2), b));
    if (b == R(0) && fabs(a) == R(1)) return cx<R>(copysign(cx_infv<R>(), a), b);
    // (log1p(z) - log1p(-z)) / 2
    cx<R> p = cx_log1p(z), q = cx_log1p(cx<R>(-a, -b));
    return cx<R>(R(0.5) * (p.re - q.re), R(0.5) * (p.im - q.im));
}

template <typename R> __device__ cx<R> cx_acos(cx<R> z) {
    R a = z.re, b = z.im, h = cx_pi<R>() / R(2);
    if (cx_nan(a)) return cx_inf(b) ? cx<R>(a, -b) : cx<R>(a, cx_nanv<R>());
    if (cx_nan(b)) {
        if (a == R(0)) return cx<R>(h, b);
        return cx_inf(a) ? cx<R>(b, cx_infv<R>()) : cx<R>(cx_nanv<R>(), cx_nanv<R>());
    }
    if (cx_inf(a) || cx_inf(b)) {
        R re = cx_inf(b) ? (cx_inf(a) ? (a > R(0) ? cx_pi<R>() / R(4) : R(3) * cx_pi<R>() / R(4)) : h)
                         : (a > R(0) ? R(0) : cx_pi<R>());
        return cx<R>(re, copysign(cx_infv<R>(), -b));
    }
    if (a == R(0) && b == R(0)) return cx<R>(h, -b);
    // acos(z) = pi/2 - asin(z), asin(z) = -i asinh(i z)
    cx<R> s = cx_mul_mi(cx_asinh(cx_mul_i(z)));
    return cx<R>(h - s.re, -s.im);
}

template <typename R> __device__ cx<R> cx_pow(cx<R> x, cx<R> y) {
    if (y.re == R(0) && y.im == R(0)) return cx<R>(R(1), R(0));
    if (x.re == R(0) && x.im == R(0) && y.im == R(0) && y.re > R(0)) return cx<R>(R(0), R(0));
    if (y.im == R(0) && y.re == R(1)) return x;
    if (y.im == R(0) && y.re == R(2)) return cx_mul(x, x);
    return cx_exp(cx_mul(y, cx_log(x)));
}

// Binary op codes: pymagma.array_api._kernels.BINARY (add 0, subtract 1, multiply 2, divide 3, pow 6).
template <typename R> __device__ __forceinline__ cx<R> cx_binary_op(int op, cx<R> a, cx<R> b) {
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return cx_mul(a, b);
        case 3: return cx_div(a, b);
        case 6: return cx_pow(a, b);
        default: return a;
    }
}

// Unary codes: pymagma.array_api._kernels.UNARY, plus conj 31.
template <typename R> __device__ cx<R> cx_unary_op(int op, cx<R> z) {
    R ln2 = R(0.69314718055994530942), ln10 = R(2.30258509299404568402);
    switch (op) {
        case 0: return cx<R>(-z.re, -z.im);
        case 1: return z;
        case 3: return cx_mul(z, z);
        case 4: return cx_sqrt(z);
        case 5: return cx_exp(z);
        case 6: return cx_log(z);
        case 7: {  // expm1: exp(a) (cos b + i sin b) - 1 without cancellation for small |z|
            R a = z.re, b = z.im;
            if (a == R(0) && b == R(0)) return cx<R>(R(0), b);  // +0 + 0j for either zero (the standard's case)
            if (cx_fin(a) && cx_fin(b) && fabs(a) < R(1) && fabs(b) < R(1)) {
                R s = sin(R(0.5) * b);
                return cx<R>(expm1(a) * cos(b) - R(2) * s * s, exp(a) * sin(b));
            }
            cx<R> e = cx_exp(z);
            return cx<R>(e.re - R(1), e.im);
        }
        case 8: return cx_log1p(z);
        case 9: { cx<R> l = cx_log(z); return cx<R>(l.re / ln2, l.im / ln2); }
        case 10: { cx<R> l = cx_log(z); return cx<R>(l.re / ln10, l.im / ln10); }
        case 11: return cx_mul_mi(cx_sinh(cx_mul_i(z)));                    // sin z = -i sinh(i z)
        case 12: return cx_cosh(cx_mul_i(z));                               // cos z = cosh(i z)
        case 13: return cx_mul_mi(cx_tanh(cx_mul_i(z)));                    // tan z = -i tanh(i z)
        case 14: return cx_tanh(z);
        case 18: return cx<R>(rint(z.re), rint(z.im));                      // round each component
        case 19: {  // sign: z / |z|, 0 for 0, NaN + NaN j for NaN components
            if (cx_nan(z.re) || cx_nan(z.im)) return cx<R>(cx_nanv<R>(), cx_nanv<R>());
            if (z.re == R(0) && z.im == R(0)) return cx<R>(R(0), R(0));
            R h = hypot(z.re, z.im);
            if (cx_inf(h)) {
                if (cx_inf(z.re) && cx_inf(z.im)) return cx<R>(cx_nanv<R>(), cx_nanv<R>());
                return cx<R>(cx_inf(z.re) ? copysign(R(1), z.re) : R(0), cx_inf(z.im) ? copysign(R(1), z.im) : R(0));
            }
            return cx<R>(z.re / h, z.im / h);
        }
        case 20: return cx_div(cx<R>(R(1), R(0)), z);
        case 23: return cx_acos(z);
        case 24: return cx_acosh(z);
        case 25: return cx_mul_mi(cx_asinh(cx_mul_i(z)));                   // asin z = -i asinh(i z)
        case 26: return cx_asinh(z);
        case 27: return cx_mul_mi(cx_atanh(cx_mul_i(z)));                   // atan z = -i atanh(i z)
        case 28: return cx_atanh(z);
        case 29: return cx_cosh(z);
        case 30: return cx_sinh(z);
        case 31: return cx<R>(z.re, -z.im);
        default: return z;
    }
}

// Real-valued functions of a complex operand: 0 abs, 1 real, 2 imag.
template <typename R> __device__ __forceinline__ R cx_part_op(int op, cx<R> z) {
    switch (op) {
        case 0: return hypot(z.re, z.im);
        case 1: return z.re;
        default: return z.im;
    }
}

// Tests: 0 isnan, 1 isinf, 2 isfinite, 3 nonzero (the cast to bool).
template <typename R> __device__ __forceinline__ bool cx_test_op(int op, cx<R> z) {
    switch (op) {
        case 0: return cx_nan(z.re) || cx_nan(z.im);
        case 1: return cx_inf(z.re) || cx_inf(z.im);
        case 2: return cx_fin(z.re) && cx_fin(z.im);
        default: return z.re != R(0) || z.im != R(0);
    }
}

template <typename R>
__global__ void cx_binary(int op, const cx<R>* __restrict__ a, const cx<R>* __restrict__ b, cx<R>* __restrict__ y,
                          i64 n, Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 oa, ob, unused;
        pm_offsets(s, i, oa, ob, unused);
        y[i] = cx_binary_op<R>(op, a[oa], b[ob]);
    }
}

// equal (0) and not_equal (1)
template <typename R>
__global__ void cx_compare(int op, const cx<R>* __restrict__ a, const cx<R>* __restrict__ b, bool* __restrict__ y,
                           i64 n, Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 oa, ob, unused;
        pm_offsets(s, i, oa, ob, unused);
        bool eq = a[oa] == b[ob];
        y[i] = op == 0 ? eq : !eq;
    }
}

template <typename R>
__global__ void cx_unary(int op, const cx<R>* __restrict__ x, cx<R>* __restrict__ y, i64 n, Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 ox, unused0, unused1;
        pm_offsets(s, i, ox, unused0, unused1);
        y[i] = cx_unary_op<R>(op, x[ox]);
    }
}

template <typename R>
__global__ void cx_part(int op, const cx<R>* __restrict__ x, R* __restrict__ y, i64 n, Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 ox, unused0, unused1;
        pm_offsets(s, i, ox, unused0, unused1);
        y[i] = cx_part_op<R>(op, x[ox]);
    }
}

template <typename R>
__global__ void cx_test(int op, const cx<R>* __restrict__ x, bool* __restrict__ y, i64 n, Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 ox, unused0, unused1;
        pm_offsets(s, i, ox, unused0, unused1);
        y[i] = cx_test_op<R>(op, x[ox]);
    }
}

// y = (cx<R>) x of a real (or bool) source: imaginary part +0.
template <typename S, typename R>
__global__ void cx_from_real(const S* __restrict__ x, cx<R>* __restrict__ y, i64 n, Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 ox, unused0, unused1;
        pm_offsets(s, i, ox, unused0, unused1);
        y[i] = cx<R>((R)x[ox], R(0));
    }
}

// complex to complex (complex64 <-> complex128, or a strided copy)
template <typename S, typename R>
__global__ void cx_cast(const cx<S>* __restrict__ x, cx<R>* __restrict__ y, i64 n, Strides3 s) {
    for (i64 i = pm_global_index(); i < n; i += pm_grid_stride()) {
        i64 ox, unused0, unused1;
        pm_offsets(s, i, ox, unused0, unused1);
        y[i] = cx<R>((R)x[ox].re, (R)x[ox].im);
    }
}

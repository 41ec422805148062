// Max pooling with the window offset of each maximum, and its gradient gathered from those offsets: the op set's
// convention (the gradient goes to the first maximum of each window, row-major) by construction, on any GPU, with
// a deterministic sum (each input element is summed by one thread, over its windows in a fixed order).
// Layout NCHW, C-contiguous; padding (top, left) may differ from (bottom, right) and is never read (it counts as
// -inf). NaN propagates as in NumPy's maximum: a window holding NaN has NaN as its maximum, at its last offset.
#include "common.cuh"

struct PoolGeometry {
    i64 planes;              // N * C
    i64 h, w;                // input height and width
    i64 ho, wo;              // output height and width
    int kh, kw, sh, sw;      // window and stride
    int top, left;           // padding before the first row / column
};

template <typename T>
__global__ void max_pool_forward(const T* __restrict__ x, T* __restrict__ y, int* __restrict__ offset,
                                 PoolGeometry g) {
    typedef typename Traits<T>::acc A;
    const i64 total = g.planes * g.ho * g.wo;
    for (i64 i = pm_global_index(); i < total; i += pm_grid_stride()) {
        const i64 ow = i % g.wo, oh = (i / g.wo) % g.ho, plane = i / (g.wo * g.ho);
        const T* xp = x + plane * g.h * g.w;
        const i64 r0 = oh * g.sh - g.top, c0 = ow * g.sw - g.left;
        A best = -(A)pm_inf();
        bool nan = false;
        for (int a = 0; a < g.kh; ++a)
            for (int b = 0; b < g.kw; ++b) {
                const i64 r = r0 + a, c = c0 + b;
                if (r < 0 || r >= g.h || c < 0 || c >= g.w) continue;
                const A v = Traits<T>::load(xp[r * g.w + c]);
                if (v != v) nan = true;
                else if (v > best) best = v;
            }
        int at = g.kh * g.kw - 1;  // NaN in the window: the maximum is NaN, at the last offset (as NumPy's rule)
        if (!nan) {
            for (int k = 0; k < g.kh * g.kw; ++k) {
                const i64 r = r0 + k / g.kw, c = c0 + k % g.kw;
                const A v = (r < 0 || r >= g.h || c < 0 || c >= g.w) ? -(A)pm_inf() : Traits<T>::load(xp[r * g.w + c]);
                if (v == best) { at = k; break; }
            }
        }
        y[i] = Traits<T>::store(nan ? (A)__longlong_as_double(0x7ff8000000000000LL) : best);
        offset[i] = at;
    }
}

template <typename T>
__global__ void max_pool_backward(const T* __restrict__ dy, const int* __restrict__ offset, T* __restrict__ dx,
                                  PoolGeometry g) {
    typedef typename Traits<T>::acc A;
    const i64 total = g.planes * g.h * g.w;
    for (i64 i = pm_global_index(); i < total; i += pm_grid_stride()) {
        const i64 c = i % g.w, r = (i / g.w) % g.h, plane = i / (g.w * g.h);
        const i64 pr = r + g.top, pc = c + g.left;  // in padded coordinates
        // the windows covering (pr, pc): oh * sh <= pr < oh * sh + kh
        const i64 oh_lo = pr < g.kh ? 0 : (pr - g.kh) / g.sh + 1, oh_hi = pr / g.sh < g.ho - 1 ? pr / g.sh : g.ho - 1;
        const i64 ow_lo = pc < g.kw ? 0 : (pc - g.kw) / g.sw + 1, ow_hi = pc / g.sw < g.wo - 1 ? pc / g.sw : g.wo - 1;
        A sum = A(0);
        for (i64 oh = oh_lo; oh <= oh_hi; ++oh)
            for (i64 ow = ow_lo; ow <= ow_hi; ++ow) {
                const i64 o = (plane * g.ho + oh) * g.wo + ow;
                const i64 k = (pr - oh * g.sh) * g.kw + (pc - ow * g.sw);
                if (offset[o] == k) sum += Traits<T>::load(dy[o]);
            }
        dx[i] = Traits<T>::store(sum);
    }
}

// Zero padding of a window op's input, one launch: y (planes, hp, wp) holds x (planes, h, w) at (top, left) and zeros
// around it (the padding cuDNN's symmetric descriptors cannot express). Elements are copied as stored (bit for bit).
struct PadGeometry {
    i64 planes;              // N * C
    i64 h, w;                // input height and width
    i64 hp, wp;              // padded height and width
    i64 top, left;           // rows / columns of zeros before the input's first
};

template <typename T>
__global__ void pad2d(const T* __restrict__ x, T* __restrict__ y, PadGeometry g) {
    typedef typename Traits<T>::acc A;
    const T zero = Traits<T>::store(A(0));
    const i64 total = g.planes * g.hp * g.wp;
    for (i64 i = pm_global_index(); i < total; i += pm_grid_stride()) {
        const i64 c = i % g.wp - g.left, r = (i / g.wp) % g.hp - g.top, plane = i / (g.wp * g.hp);
        y[i] = (r < 0 || r >= g.h || c < 0 || c >= g.w) ? zero : x[(plane * g.h + r) * g.w + c];
    }
}

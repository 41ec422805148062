// Fused gate kernels of the LSTM and GRU recurrences, one launch per time step, one thread per (batch row, unit).
// Layouts: x_proj (N, T, G u) batch-major as the caller made it; the states hs (and cs) (T + 1, N, u) time-major,
// state 0 the zero initial state, so that step t reads state t and writes state t + 1; the saved gates (T, N, G u)
// time-major; y (N, T, u) when every step's output is wanted (write_y). The recurrent product of a step (N, G u) is
// a gemm the caller runs before the forward kernel and after the backward kernel (with the state gradient dh).
#include "common.cuh"

template <typename A> __device__ __forceinline__ A pm_sigmoid(A v) { return A(1) / (A(1) + exp(-v)); }

// LSTM forward, step t: z = x_proj[:, t] + rec; gates i, f, g, o; c' = f c + i g; h' = o tanh(c').
template <typename T>
__global__ void lstm_gates_forward(const T* __restrict__ x_proj, const T* __restrict__ rec, T* __restrict__ cs,
                                   T* __restrict__ hs, T* __restrict__ gates, T* __restrict__ y, i64 n, i64 steps,
                                   i64 u, i64 t, int write_y) {
    typedef typename Traits<T>::acc A;
    for (i64 k = pm_global_index(); k < n * u; k += pm_grid_stride()) {
        i64 b = k / u, j = k - b * u;
        const T* x = x_proj + (b * steps + t) * 4 * u;
        const T* r = rec + b * 4 * u;
        T* g = gates + (t * n + b) * 4 * u;
        A i = pm_sigmoid<A>(Traits<T>::load(x[j]) + Traits<T>::load(r[j]));
        A f = pm_sigmoid<A>(Traits<T>::load(x[u + j]) + Traits<T>::load(r[u + j]));
        A c = tanh(Traits<T>::load(x[2 * u + j]) + Traits<T>::load(r[2 * u + j]));
        A o = pm_sigmoid<A>(Traits<T>::load(x[3 * u + j]) + Traits<T>::load(r[3 * u + j]));
        g[j] = Traits<T>::store(i);
        g[u + j] = Traits<T>::store(f);
        g[2 * u + j] = Traits<T>::store(c);
        g[3 * u + j] = Traits<T>::store(o);
        A cell = f * Traits<T>::load(cs[t * n * u + k]) + i * c;
        A h = o * tanh(cell);
        cs[(t + 1) * n * u + k] = Traits<T>::store(cell);
        hs[(t + 1) * n * u + k] = Traits<T>::store(h);
        if (write_y) y[(b * steps + t) * u + j] = Traits<T>::store(h);
    }
}

// The gradient reaching state h_t of sample b, unit j (k = b * u + j): the recurrent part dh plus the output's own
// (dy_seq: dy (N, T, u) at every step; else dy (N, u) at the last step only).
template <typename T, typename A>
__device__ __forceinline__ A pm_state_grad(const T* dy, const T* dh, i64 k, i64 b, i64 j, i64 steps, i64 u, i64 t,
                                           int dy_seq) {
    A h_grad = Traits<T>::load(dh[k]);
    if (dy_seq) h_grad += Traits<T>::load(dy[(b * steps + t) * u + j]);
    else if (t == steps - 1) h_grad += Traits<T>::load(dy[k]);
    return h_grad;
}

// LSTM backward, step t. dh (N, u) holds the gradient reaching h' through the recurrence (the gemm of step t + 1;
// zero at the last step); dy adds the output's own (dy_seq: dy (N, T, u), else dy (N, u) at the last step only).
// dc (N, u) carries the cell gradient from step to step, in place. Writes the pre-activation gate gradients to
// dgates (time-major, for the recurrent kernel's gradient) and dx_proj (batch-major).
template <typename T>
__global__ void lstm_gates_backward(const T* __restrict__ dy, const T* __restrict__ dh, T* __restrict__ dc,
                                    const T* __restrict__ gates, const T* __restrict__ cs, T* __restrict__ dgates,
                                    T* __restrict__ dx_proj, i64 n, i64 steps, i64 u, i64 t, int dy_seq) {
    typedef typename Traits<T>::acc A;
    for (i64 k = pm_global_index(); k < n * u; k += pm_grid_stride()) {
        i64 b = k / u, j = k - b * u;
        A h_grad = pm_state_grad<T, A>(dy, dh, k, b, j, steps, u, t, dy_seq);
        const T* g = gates + (t * n + b) * 4 * u;
        A i = Traits<T>::load(g[j]), f = Traits<T>::load(g[u + j]);
        A c = Traits<T>::load(g[2 * u + j]), o = Traits<T>::load(g[3 * u + j]);
        A tc = tanh(Traits<T>::load(cs[(t + 1) * n * u + k]));
        A c_grad = Traits<T>::load(dc[k]) + h_grad * o * (A(1) - tc * tc);
        A di = c_grad * c * i * (A(1) - i);
        A df = c_grad * Traits<T>::load(cs[t * n * u + k]) * f * (A(1) - f);
        A dg = c_grad * i * (A(1) - c * c);
        A d_o = h_grad * tc * o * (A(1) - o);
        dc[k] = Traits<T>::store(c_grad * f);
        T* out = dgates + (t * n + b) * 4 * u;
        T* dx = dx_proj + (b * steps + t) * 4 * u;
        out[j] = dx[j] = Traits<T>::store(di);
        out[u + j] = dx[u + j] = Traits<T>::store(df);
        out[2 * u + j] = dx[2 * u + j] = Traits<T>::store(dg);
        out[3 * u + j] = dx[3 * u + j] = Traits<T>::store(d_o);
    }
}

// GRU forward, step t: q = rec + bias (rec = h U); r, z = sigmoid(x + q) of their blocks; n = tanh(x_n + r q_n);
// h' = n + z (h - n). Saves r, z, n and q_n.
template <typename T>
__global__ void gru_gates_forward(const T* __restrict__ x_proj, const T* __restrict__ rec, const T* __restrict__ bias,
                                  T* __restrict__ hs, T* __restrict__ gates, T* __restrict__ qn, T* __restrict__ y,
                                  i64 n, i64 steps, i64 u, i64 t, int write_y) {
    typedef typename Traits<T>::acc A;
    for (i64 k = pm_global_index(); k < n * u; k += pm_grid_stride()) {
        i64 b = k / u, j = k - b * u;
        const T* x = x_proj + (b * steps + t) * 3 * u;
        const T* q = rec + b * 3 * u;
        A r = pm_sigmoid<A>(Traits<T>::load(x[j]) + Traits<T>::load(q[j]) + Traits<T>::load(bias[j]));
        A z = pm_sigmoid<A>(Traits<T>::load(x[u + j]) + Traits<T>::load(q[u + j]) + Traits<T>::load(bias[u + j]));
        A q_n = Traits<T>::load(q[2 * u + j]) + Traits<T>::load(bias[2 * u + j]);
        A c = tanh(Traits<T>::load(x[2 * u + j]) + r * q_n);
        A h = c + z * (Traits<T>::load(hs[t * n * u + k]) - c);
        T* g = gates + (t * n + b) * 3 * u;
        g[j] = Traits<T>::store(r);
        g[u + j] = Traits<T>::store(z);
        g[2 * u + j] = Traits<T>::store(c);
        qn[t * n * u + k] = Traits<T>::store(q_n);
        hs[(t + 1) * n * u + k] = Traits<T>::store(h);
        if (write_y) y[(b * steps + t) * u + j] = Traits<T>::store(h);
    }
}

// GRU backward, step t. dh (N, u), in place: in, the gradient reaching h' through the recurrence; out, its direct
// part z dh to h (the caller's gemm then adds dq U^T). Writes dx_proj (batch-major) and dq, the gradient of
// q = h U + b_r (time-major), whose n block is r times x_proj's.
template <typename T>
__global__ void gru_gates_backward(const T* __restrict__ dy, T* __restrict__ dh, const T* __restrict__ gates,
                                   const T* __restrict__ qn, const T* __restrict__ hs, T* __restrict__ dq,
                                   T* __restrict__ dx_proj, i64 n, i64 steps, i64 u, i64 t, int dy_seq) {
    typedef typename Traits<T>::acc A;
    for (i64 k = pm_global_index(); k < n * u; k += pm_grid_stride()) {
        i64 b = k / u, j = k - b * u;
        A h_grad = pm_state_grad<T, A>(dy, dh, k, b, j, steps, u, t, dy_seq);
        const T* g = gates + (t * n + b) * 3 * u;
        A r = Traits<T>::load(g[j]), z = Traits<T>::load(g[u + j]), c = Traits<T>::load(g[2 * u + j]);
        A dn = h_grad * (A(1) - z) * (A(1) - c * c);
        A dr = dn * Traits<T>::load(qn[t * n * u + k]) * r * (A(1) - r);
        A dz = h_grad * (Traits<T>::load(hs[t * n * u + k]) - c) * z * (A(1) - z);
        dh[k] = Traits<T>::store(h_grad * z);
        T* out = dq + (t * n + b) * 3 * u;
        T* dx = dx_proj + (b * steps + t) * 3 * u;
        out[j] = dx[j] = Traits<T>::store(dr);
        out[u + j] = dx[u + j] = Traits<T>::store(dz);
        dx[2 * u + j] = Traits<T>::store(dn);
        out[2 * u + j] = Traits<T>::store(dn * r);
    }
}

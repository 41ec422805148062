// Row normalisation over the last axis of (rows, cols) data: LayerNorm, RMSNorm (no centring) and the statistics of
// GroupNorm (rows = samples x groups).  Forward and backward each run one block per row with the statistics in the
// accumulation type; the parameter gradients sum over the rows in a fixed order (one thread per column), so every
// result is the same on every run.
#include "common.cuh"

#define PM_NORM_THREADS 256

// y = (x - mean) * rstd * gamma + beta with rstd = 1 / sqrt(var + eps) (biased variance, two passes); with rms the
// mean is 0 and var is mean(x^2).  gamma and beta may be null (no scale, no shift); mean and rstd (rows,) are saved.
template <typename T>
__global__ void norm_forward(const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
                             T* __restrict__ y, T* __restrict__ mean_out, T* __restrict__ rstd_out, i64 rows,
                             i64 cols, double eps, int rms) {
    typedef typename Traits<T>::acc A;
    __shared__ A shared[PM_NORM_THREADS];
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* row = x + r * cols;
        A mu = A(0);
        if (!rms) {
            A s = A(0);
            for (i64 j = threadIdx.x; j < cols; j += blockDim.x) s += Traits<T>::load(row[j]);
            mu = pm_block_reduce<A>(s, false, shared) / (A)cols;
        }
        A q = A(0);
        for (i64 j = threadIdx.x; j < cols; j += blockDim.x) {
            A d = Traits<T>::load(row[j]) - mu;
            q += d * d;
        }
        A rstd = A(1) / sqrt(pm_block_reduce<A>(q, false, shared) / (A)cols + (A)eps);
        for (i64 j = threadIdx.x; j < cols; j += blockDim.x) {
            A v = (Traits<T>::load(row[j]) - mu) * rstd;
            if (gamma) v *= Traits<T>::load(gamma[j]);
            if (beta) v += Traits<T>::load(beta[j]);
            y[r * cols + j] = Traits<T>::store(v);
        }
        if (threadIdx.x == 0) {
            mean_out[r] = Traits<T>::store(mu);
            rstd_out[r] = Traits<T>::store(rstd);
        }
    }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * gamma (gamma null: g = dy) and xhat the normalised
// input; with rms the mean(g) term is absent.  One block per row.
// dx of row r (the block's threads together).
template <typename T>
__device__ void pm_norm_backward_row(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ gamma,
                                     const T* __restrict__ mean, const T* __restrict__ rstd, T* __restrict__ dx,
                                     i64 r, i64 cols, int rms, typename Traits<T>::acc* shared) {
    typedef typename Traits<T>::acc A;
    const T* xr = x + r * cols;
    const T* dr = dy + r * cols;
    A mu = Traits<T>::load(mean[r]), rs = Traits<T>::load(rstd[r]);
    A sg = A(0), sgx = A(0);
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) {
        A g = Traits<T>::load(dr[j]);
        if (gamma) g *= Traits<T>::load(gamma[j]);
        sg += g;
        sgx += g * (Traits<T>::load(xr[j]) - mu) * rs;
    }
    A mg = rms ? A(0) : pm_block_reduce<A>(sg, false, shared) / (A)cols;
    A mgx = pm_block_reduce<A>(sgx, false, shared) / (A)cols;
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) {
        A g = Traits<T>::load(dr[j]);
        if (gamma) g *= Traits<T>::load(gamma[j]);
        A xh = (Traits<T>::load(xr[j]) - mu) * rs;
        dx[r * cols + j] = Traits<T>::store(rs * (g - mg - xh * mgx));
    }
}

template <typename T>
__global__ void norm_backward(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ gamma,
                              const T* __restrict__ mean, const T* __restrict__ rstd, T* __restrict__ dx, i64 rows,
                              i64 cols, int rms) {
    __shared__ typename Traits<T>::acc shared[PM_NORM_THREADS];
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) pm_norm_backward_row(dy, x, gamma, mean, rstd, dx, r, cols, rms, shared);
}

// The parameter gradients in two deterministic stages.  Stage 1: block b takes part p = b / col_blocks (rows
// [p * part_rows, (p + 1) * part_rows)) and one thread per column of its column block, and writes the part's sums of
// dy * xhat and of dy to pg[p, j] and pb[p, j].  Stage 2 (norm_param_sum): one thread per column adds the parts in
// order.  Every sum has a fixed order, and the rows are spread over parts * col_blocks blocks instead of cols threads.
template <typename T>
__device__ void pm_norm_param_block(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ mean,
                                    const T* __restrict__ rstd, T* __restrict__ pg, T* __restrict__ pb, i64 rows,
                                    i64 cols, i64 part_rows, i64 b, i64 col_blocks) {
    typedef typename Traits<T>::acc A;
    i64 p = b / col_blocks;
    i64 j = (b - p * col_blocks) * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    i64 end = (p + 1) * part_rows < rows ? (p + 1) * part_rows : rows;
    A sg = A(0), sb = A(0);
    for (i64 r = p * part_rows; r < end; ++r) {
        A d = Traits<T>::load(dy[r * cols + j]);
        sb += d;
        sg += d * (Traits<T>::load(x[r * cols + j]) - Traits<T>::load(mean[r])) * Traits<T>::load(rstd[r]);
    }
    pg[p * cols + j] = Traits<T>::store(sg);
    pb[p * cols + j] = Traits<T>::store(sb);
}

template <typename T>
__global__ void norm_param_grad(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ mean,
                                const T* __restrict__ rstd, T* __restrict__ pg, T* __restrict__ pb, i64 rows,
                                i64 cols, i64 part_rows, i64 parts) {
    i64 col_blocks = (cols + blockDim.x - 1) / blockDim.x;
    for (i64 b = blockIdx.x; b < parts * col_blocks; b += gridDim.x)
        pm_norm_param_block(dy, x, mean, rstd, pg, pb, rows, cols, part_rows, b, col_blocks);
}

// norm_backward and norm_param_grad in one launch: blocks [0, row_blocks) take rows (r = block, block + row_blocks,
// ...), the next parts * col_blocks blocks one parameter block each; with one part, pg and pb are dgamma and dbeta.
template <typename T>
__global__ void norm_backward_params(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ gamma,
                                     const T* __restrict__ mean, const T* __restrict__ rstd, T* __restrict__ dx,
                                     T* __restrict__ pg, T* __restrict__ pb, i64 rows, i64 cols, int rms,
                                     i64 row_blocks, i64 part_rows, i64 parts) {
    __shared__ typename Traits<T>::acc shared[PM_NORM_THREADS];
    const i64 col_blocks = (cols + blockDim.x - 1) / blockDim.x;
    for (i64 b = blockIdx.x; b < row_blocks + parts * col_blocks; b += gridDim.x) {
        if (b < row_blocks) {
            for (i64 r = b; r < rows; r += row_blocks) pm_norm_backward_row(dy, x, gamma, mean, rstd, dx, r, cols, rms, shared);
        } else {
            pm_norm_param_block(dy, x, mean, rstd, pg, pb, rows, cols, part_rows, b - row_blocks, col_blocks);
        }
    }
}

// dgamma[j] = sum over parts (in order) of pg[p, j], dbeta[j] likewise.
template <typename T>
__global__ void norm_param_sum(const T* __restrict__ pg, const T* __restrict__ pb, T* __restrict__ dgamma,
                               T* __restrict__ dbeta, i64 parts, i64 cols) {
    typedef typename Traits<T>::acc A;
    for (i64 j = pm_global_index(); j < cols; j += pm_grid_stride()) {
        A sg = A(0), sb = A(0);
        for (i64 p = 0; p < parts; ++p) {
            sg += Traits<T>::load(pg[p * cols + j]);
            sb += Traits<T>::load(pb[p * cols + j]);
        }
        dgamma[j] = Traits<T>::store(sg);
        dbeta[j] = Traits<T>::store(sb);
    }
}

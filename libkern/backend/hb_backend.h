/*
 * hb_kernels.h: the CPU reference kernels of the Qwen4Exp graph.
 *
 * Float32 arithmetic throughout; weights are read in their storage type
 * (F32, BF16, F16, or MLX affine4 rows) and widened one row at a time, so a
 * weight matrix is never copied.  The GPU backends (metal/) are compared
 * against these.  Nothing here allocates in a per-token path except through
 * the caller's scratch.
 */
#ifndef HB_KERNELS_H
#define HB_KERNELS_H

#include "hb_base.h"
#include "hb_pool.h"

enum hb_wtype {
	HB_W_F32 = 0,
	HB_W_F16 = 1,
	HB_W_BF16 = 2,
	HB_W_AFFINE4_G64 = 3, /* MLX affine layout, rows of `cols` weights */
};

/* A row-major weight matrix [rows][cols] in its storage type. */
struct hb_wmat {
	const void *data;
	enum hb_wtype type;
	uint64_t rows, cols;
	uint64_t row_bytes;
};

/* Widen row r of w into out[cols]. */
void hb_wmat_row(const struct hb_wmat *w, uint64_t r, float *out);

/*
 * y[t][r] = sum_c w[r][c] * x[t][c] for t < T, r < w->rows (a Linear layer
 * applied to T inputs).  Rows are spread over the pool (may be NULL).
 * x is [T][cols], y is [T][rows].  scratch: (pool size) * cols floats.
 */
void hb_matmul(struct hb_pool *pool, const struct hb_wmat *w, const float *x, size_t T,
	       float *y, float *scratch);
/* The same for one input on the calling thread. */
void hb_matvec(const struct hb_wmat *w, const float *x, float *y, float *row_scratch);

float hb_dot(const float *a, const float *b, size_t n);

/* Zero-centred RMSNorm: out = x / rms(x) * (1 + w), per group of `group`
 * values (group == n: one group).  out may alias x. */
void hb_rmsnorm_zc(const float *x, const float *w, size_t n, size_t group, double eps,
		   float *out);
/* Plain RMSNorm with weight w (the gated GDN norm's first half). */
void hb_rmsnorm_w(const float *x, const float *w, size_t n, double eps, float *out);
/* x * rsqrt(sum(x^2) + eps) in place (upstream's l2norm). */
void hb_l2norm(float *x, size_t n, double eps);

float hb_silu(float x);
float hb_sigmoid(float x);
/* torch.nn.functional.softplus with beta 1, threshold 20. */
float hb_softplus(float x);
/* In-place softmax over n values (max-subtracted). */
void hb_softmax(float *x, size_t n);

#endif

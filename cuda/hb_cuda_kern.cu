/*
 * hb_cuda_kern.cu: the CUDA backend's kernels (hb_cuda_kern.h says what
 * each computes).  Built for sm_90 (H100, H200) with the toolkit's nvcc;
 * CUB, part of the toolkit, supplies the block reductions and scans.
 *
 * Numerics.  Weights are widened exactly as the CPU reference widens them
 * (bf16 and f16 exactly; affine4 as scale * q + bias with the product
 * exact and the sum rounded once), so a matrix product differs from the
 * reference only in its float32 summation order.  The delta rule keeps the
 * reference's operations and order, one thread per value column, with
 * explicit roundings (__fmul_rn, __fadd_rn: never a fused multiply-add), so
 * it is bit-identical.  QSA selection applies the reference's total order
 * (score descending, group ascending) to its own scores: a selection can
 * differ only where two groups' scores lie within rounding of each other.
 */
#include "hb_cuda_kern.h"
#include "hb_cuda_widen.cuh"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

/* whether the environment sets name to exactly value (the A/B switches,
 * read at each launch: tests change them between calls) */
static bool env_is(const char *name, const char *value)
{
	const char *v = getenv(name);

	return v && !strcmp(v, value);
}

/* ---------------------------------------------------------------- matmul */

#define MM_BT 32  /* tokens per tile */
#define MM_BR 64  /* weight rows per tile */
#define MM_BK 64  /* columns per step: one affine4 group */
#define MM_THREADS 256

/* one tile: weight rows [r0, r0 + MM_BR) by tokens [t0, t0 + MM_BT) */
template <int TYPE>
__device__ __forceinline__ void mm_tile(const uint8_t *__restrict__ W, uint64_t row_bytes, uint64_t rows,
					uint64_t cols, const float *__restrict__ x, size_t T, float *__restrict__ y,
					uint64_t r0, size_t t0)
{
	__shared__ float ws[MM_BK][MM_BR + 1];
	__shared__ float xs[MM_BK][MM_BT + 1];
	int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
	float acc[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};

	for (uint64_t k0 = 0; k0 < cols; k0 += MM_BK) {
		for (int e = tid; e < MM_BR * MM_BK; e += MM_THREADS) {
			int r = e / MM_BK, c = e % MM_BK;
			uint64_t gr = r0 + r, gc = k0 + c;
			ws[c][r] = gr < rows && gc < cols ? widen<TYPE>(W + gr * row_bytes, gc) : 0.0f;
		}
		for (int e = tid; e < MM_BT * MM_BK; e += MM_THREADS) {
			int t = e / MM_BK, c = e % MM_BK;
			size_t gt = t0 + t;
			uint64_t gc = k0 + c;
			xs[c][t] = gt < T && gc < cols ? x[gt * cols + gc] : 0.0f;
		}
		__syncthreads();
#pragma unroll 8
		for (int c = 0; c < MM_BK; c++) {
			float a0 = xs[c][ty], a1 = xs[c][ty + 16];
#pragma unroll
			for (int j = 0; j < 4; j++) {
				float b = ws[c][tx + 16 * j];
				acc[0][j] = fmaf(a0, b, acc[0][j]);
				acc[1][j] = fmaf(a1, b, acc[1][j]);
			}
		}
		__syncthreads();
	}
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 4; j++) {
			size_t t = t0 + ty + 16 * i;
			uint64_t r = r0 + tx + 16 * j;
			if (t < T && r < rows)
				y[t * rows + r] = acc[i][j];
		}
}

template <int TYPE>
__global__ void __launch_bounds__(MM_THREADS)
mm_kernel(const uint8_t *__restrict__ W, uint64_t row_bytes, uint64_t rows, uint64_t cols,
	  const float *__restrict__ x, size_t T, float *__restrict__ y)
{
	mm_tile<TYPE>(W, row_bytes, rows, cols, x, T, y, (uint64_t)blockIdx.x * MM_BR, (size_t)blockIdx.y * MM_BT);
}

/* expert z = blockIdx.z: weights W[z], its tokens [off[z], off[z + 1]) of
 * the packed x, its outputs at the same rows of the packed y */
template <int TYPE>
__global__ void __launch_bounds__(MM_THREADS)
mm_grouped_kernel(const uint8_t *const *__restrict__ W, uint64_t row_bytes, uint64_t rows, uint64_t cols,
		  const int32_t *__restrict__ off, const float *__restrict__ x, float *__restrict__ y)
{
	size_t a = (size_t)off[blockIdx.z], T = (size_t)off[blockIdx.z + 1] - a, t0 = (size_t)blockIdx.y * MM_BT;

	if (t0 >= T) /* the whole block: no barrier is skipped by part of it */
		return;
	mm_tile<TYPE>(W[blockIdx.z], row_bytes, rows, cols, x + a * cols, T, y + a * rows,
		      (uint64_t)blockIdx.x * MM_BR, t0);
}

extern "C" int hbk_matmul_grouped(int type, const void *const *W, uint64_t row_bytes, uint64_t rows,
				  uint64_t cols, const int32_t *off, size_t groups, size_t most, const float *x,
				  float *y)
{
	dim3 grid((unsigned)((rows + MM_BR - 1) / MM_BR), (unsigned)((most + MM_BT - 1) / MM_BT), (unsigned)groups);
	const uint8_t *const *w = (const uint8_t *const *)W;

	if (!groups || !most || !rows)
		return 0;
	if (groups > 65535)
		return (int)cudaErrorInvalidValue;
	switch (type) {
	case HBK_F32: mm_grouped_kernel<HBK_F32><<<grid, MM_THREADS>>>(w, row_bytes, rows, cols, off, x, y); break;
	case HBK_F16: mm_grouped_kernel<HBK_F16><<<grid, MM_THREADS>>>(w, row_bytes, rows, cols, off, x, y); break;
	case HBK_BF16: mm_grouped_kernel<HBK_BF16><<<grid, MM_THREADS>>>(w, row_bytes, rows, cols, off, x, y); break;
	case HBK_AFFINE4_G64:
		mm_grouped_kernel<HBK_AFFINE4_G64><<<grid, MM_THREADS>>>(w, row_bytes, rows, cols, off, x, y);
		break;
	default: return (int)cudaErrorInvalidValue;
	}
	return (int)cudaGetLastError();
}

/* xg[p] = x[pack[p] / k]: the packed inputs, one row per (token, rank) */
__global__ void gather_kernel(const float *x, size_t H, const int32_t *pack, size_t k, size_t P, float *xg)
{
	size_t p = blockIdx.x;
	const float *src = x + (size_t)(pack[p] / (int32_t)k) * H;

	for (size_t j = threadIdx.x; j < H; j += blockDim.x)
		xg[p * H + j] = src[j];
	(void)P;
}

extern "C" int hbk_gather_rows(const float *x, size_t H, const int32_t *pack, size_t k, size_t P, float *xg)
{
	if (!P)
		return 0;
	gather_kernel<<<(unsigned)P, 256>>>(x, H, pack, k, P, xg);
	return (int)cudaGetLastError();
}

/* y[t][j] = sum over r < k, from +0 in rank order, of out[at[t k + r]][j] * w[t k + r],
 * each product and sum rounded once (no fused multiply-add), as the
 * graph's loop computes it */
__global__ void combine_kernel(const float *out, const int32_t *at, const float *w, size_t k, size_t H, float *y)
{
	size_t t = blockIdx.x;

	for (size_t j = threadIdx.x; j < H; j += blockDim.x) {
		float acc = 0;
		for (size_t r = 0; r < k; r++)
			acc = __fadd_rn(acc, __fmul_rn(out[(size_t)at[t * k + r] * H + j], w[t * k + r]));
		y[t * H + j] = acc;
	}
}

extern "C" int hbk_combine(const float *out, const int32_t *at, const float *w, size_t T, size_t k, size_t H,
			   float *y)
{
	if (!T)
		return 0;
	combine_kernel<<<(unsigned)T, 256>>>(out, at, w, k, H, y);
	return (int)cudaGetLastError();
}

extern "C" int hbk_matmul(int type, const void *W, uint64_t row_bytes, uint64_t rows, uint64_t cols,
			  const float *x, size_t T, float *y)
{
	dim3 grid((unsigned)((rows + MM_BR - 1) / MM_BR), (unsigned)((T + MM_BT - 1) / MM_BT));
	const uint8_t *w = (const uint8_t *)W;

	if (!T || !rows)
		return 0;
	switch (type) {
	case HBK_F32: mm_kernel<HBK_F32><<<grid, MM_THREADS>>>(w, row_bytes, rows, cols, x, T, y); break;
	case HBK_F16: mm_kernel<HBK_F16><<<grid, MM_THREADS>>>(w, row_bytes, rows, cols, x, T, y); break;
	case HBK_BF16: mm_kernel<HBK_BF16><<<grid, MM_THREADS>>>(w, row_bytes, rows, cols, x, T, y); break;
	case HBK_AFFINE4_G64:
		mm_kernel<HBK_AFFINE4_G64><<<grid, MM_THREADS>>>(w, row_bytes, rows, cols, x, T, y);
		break;
	default: return (int)cudaErrorInvalidValue;
	}
	return (int)cudaGetLastError();
}

/* ---------------------------------------------------------------- SwiGLU */

__global__ void act_kernel(const float *g, const float *u, size_t n, float *a)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		float x = g[i];
		float s = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x)));
		a[i] = __fmul_rn(__fmul_rn(x, s), u[i]);
	}
}

extern "C" int hbk_swiglu_act(const float *g, const float *u, size_t n, float *a)
{
	if (!n)
		return 0;
	act_kernel<<<(unsigned)((n + 255) / 256), 256>>>(g, u, n, a);
	return (int)cudaGetLastError();
}

/* ---------------------------------------------------------------- gated delta rule */

/* one token of value head h, value column j: both passes over column j
 * of S in increasing i, as the reference sums them */
__device__ __forceinline__ float gdn_column(float *S, const float *q, const float *k, float v, float b,
					    float dec, size_t dk, size_t dv, size_t j, float qscale)
{
	float m = 0, d, acc = 0;

	for (size_t i = 0; i < dk; i++) {
		float s = __fmul_rn(S[i * dv + j], dec);
		S[i * dv + j] = s;
		m = __fadd_rn(m, __fmul_rn(s, k[i]));
	}
	d = __fmul_rn(__fadd_rn(v, -m), b);
	for (size_t i = 0; i < dk; i++) {
		float s = __fadd_rn(S[i * dv + j], __fmul_rn(k[i], d));
		S[i * dv + j] = s;
		acc = __fadd_rn(acc, __fmul_rn(s, __fmul_rn(q[i], qscale)));
	}
	return acc;
}

/* one block per value head, one thread per value column */
__global__ void gdn_kernel(float *S0, const float *q0, const float *k0, const float *v0, const float *beta,
			   const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o0)
{
	size_t h = blockIdx.x, j = threadIdx.x, rep = nv / nk;

	if (j >= dv)
		return;
	o0[h * dv + j] = gdn_column(S0 + h * dk * dv, q0 + (h / rep) * dk, k0 + (h / rep) * dk, v0[h * dv + j],
				    beta[h], decay[h], dk, dv, j, qscale);
}

/* the chunk: each thread owns its column of S through every token, so
 * the tokens run in order with no barrier between them */
__global__ void gdn_scan_kernel(float *S0, const float *qkv, size_t ld, const float *beta, const float *decay,
				struct hbk_seqs sq, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o,
				size_t ldo)
{
	size_t h = blockIdx.x, j = threadIdx.x, rep = nv / nk, r0 = sq.off[blockIdx.y], T = sq.len[blockIdx.y];

	if (j >= dv)
		return;
	S0 += blockIdx.y * sq.s_stride, qkv += r0 * ld, beta += r0 * nv, decay += r0 * nv, o += r0 * ldo;
	for (size_t t = 0; t < T; t++) {
		const float *x = qkv + t * ld;
		o[t * ldo + h * dv + j] = gdn_column(S0 + h * dk * dv, x + (h / rep) * dk, x + nk * dk + (h / rep) * dk,
						     x[2 * nk * dk + h * dv + j], beta[t * nv + h], decay[t * nv + h],
						     dk, dv, j, qscale);
	}
}

/* the same for a key width known when compiled: each thread's column of
 * S in registers through the chunk, the token's q and k in shared memory;
 * the operations and their order are gdn_column's */
template <int DK>
__global__ void gdn_scan_reg_kernel(float *S0, const float *qkv, size_t ld, const float *beta, const float *decay,
				    struct hbk_seqs sq, size_t nk, size_t nv, size_t dv, float qscale, float *o,
				    size_t ldo)
{
	__shared__ float qs[DK], ks[DK];
	size_t h = blockIdx.x, j = threadIdx.x, rep = nv / nk, r0 = sq.off[blockIdx.y], T = sq.len[blockIdx.y];
	float *S = S0 + blockIdx.y * sq.s_stride + h * DK * dv, col[DK];
	bool live = j < dv;

	qkv += r0 * ld, beta += r0 * nv, decay += r0 * nv, o += r0 * ldo;

	if (live)
#pragma unroll
		for (int i = 0; i < DK; i++)
			col[i] = S[i * dv + j];
	for (size_t t = 0; t < T; t++) {
		const float *x = qkv + t * ld;
		for (unsigned i = threadIdx.x; i < DK; i += blockDim.x)
			qs[i] = x[(h / rep) * DK + i], ks[i] = x[nk * DK + (h / rep) * DK + i];
		__syncthreads();
		if (live) {
			float dec = decay[t * nv + h], b = beta[t * nv + h], m = 0, d, acc = 0;
#pragma unroll
			for (int i = 0; i < DK; i++) {
				col[i] = __fmul_rn(col[i], dec);
				m = __fadd_rn(m, __fmul_rn(col[i], ks[i]));
			}
			d = __fmul_rn(__fadd_rn(x[2 * nk * DK + h * dv + j], -m), b);
#pragma unroll
			for (int i = 0; i < DK; i++) {
				col[i] = __fadd_rn(col[i], __fmul_rn(ks[i], d));
				acc = __fadd_rn(acc, __fmul_rn(col[i], __fmul_rn(qs[i], qscale)));
			}
			o[t * ldo + h * dv + j] = acc;
		}
		__syncthreads(); /* qs and ks are the next token's after this */
	}
	if (live)
#pragma unroll
		for (int i = 0; i < DK; i++)
			S[i * dv + j] = col[i];
}

extern "C" int hbk_gdn_scan_seqs(float *S, const float *qkv, size_t ld, const float *beta, const float *decay,
				 const struct hbk_seqs *q, size_t nk, size_t nv, size_t dk, size_t dv, float qscale,
				 float *o, size_t ldo)
{
	unsigned threads = (unsigned)((dv + 31) / 32 * 32);
	dim3 grid((unsigned)nv, q->n);
	int rc;

	if (!nv || !nk || nv % nk || dv > HBK_GDN_MAXDV || q->n > HBK_SEQS_MAX)
		return (int)cudaErrorInvalidValue;
	if (!q->n)
		return 0;
	/* the pipelined scan where it is built for the width (bit-identical);
	 * HB_CUDA_GDN=serial keeps this file's (the A/B of tests and benchmarks) */
	if (!env_is("HB_CUDA_GDN", "serial") &&
	    (rc = hbk_gdn_scan_pipe(S, qkv, ld, beta, decay, q, nk, nv, dk, dv, qscale, o, ldo)) != -1)
		return rc;
	if (dk == 128)
		gdn_scan_reg_kernel<128><<<grid, threads>>>(S, qkv, ld, beta, decay, *q, nk, nv, dv, qscale, o, ldo);
	else if (dk == 64)
		gdn_scan_reg_kernel<64><<<grid, threads>>>(S, qkv, ld, beta, decay, *q, nk, nv, dv, qscale, o, ldo);
	else
		gdn_scan_kernel<<<grid, threads>>>(S, qkv, ld, beta, decay, *q, nk, nv, dk, dv, qscale, o, ldo);
	return (int)cudaGetLastError();
}

extern "C" int hbk_gdn_scan(float *S, const float *qkv, size_t ld, const float *beta, const float *decay,
			    size_t T, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o, size_t ldo)
{
	struct hbk_seqs q;

	if (!T)
		return !nv || !nk || nv % nk || dv > HBK_GDN_MAXDV ? (int)cudaErrorInvalidValue : 0;
	q.n = 1, q.off[0] = 0, q.len[0] = (uint32_t)T, q.s_stride = 0;
	return hbk_gdn_scan_seqs(S, qkv, ld, beta, decay, &q, nk, nv, dk, dv, qscale, o, ldo);
}

extern "C" int hbk_gdn_step(float *S, const float *q, const float *k, const float *v, const float *beta,
			    const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, float qscale,
			    float *o)
{
	unsigned threads = (unsigned)((dv + 31) / 32 * 32);

	if (!nv || !nk || nv % nk || dv > HBK_GDN_MAXDV)
		return (int)cudaErrorInvalidValue;
	gdn_kernel<<<(unsigned)nv, threads>>>(S, q, k, v, beta, decay, nk, nv, dk, dv, qscale, o);
	return (int)cudaGetLastError();
}

/* ---------------------------------------------------------------- QSA selection */

/* one warp per group: sum over heads of relu(q_h . k_g), times 1/sqrt(dim) */
__device__ __forceinline__ void qsa_score(const float *iq, size_t heads, size_t dim, const float *pooled,
					  uint64_t g, unsigned lane, float scale, float *scores)
{
	float sc = 0;

	for (size_t h = 0; h < heads; h++) {
		float d = 0;
		for (size_t i = lane; i < dim; i += 32)
			d = fmaf(iq[h * dim + i], pooled[g * dim + i], d);
		for (int off = 16; off; off >>= 1)
			d += __shfl_xor_sync(0xffffffffu, d, off);
		sc += d > 0 ? d : 0;
	}
	if (lane == 0)
		scores[g] = sc * scale;
}

__global__ void qsa_score_kernel(const float *iq, size_t heads, size_t dim, const float *pooled,
				 uint64_t groups, float scale, float *scores)
{
	uint64_t g = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;

	if (g < groups)
		qsa_score(iq, heads, dim, pooled, g, threadIdx.x % 32, scale, scores);
}

/* query blockIdx.y of a batch */
__global__ void qsa_score_batch_kernel(const float *iq, size_t iq_ld, size_t heads, size_t dim,
				       const float *pooled, const uint64_t *groups, float scale, float *scores,
				       size_t scores_ld)
{
	uint64_t g = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	size_t i = blockIdx.y;

	if (g < groups[i])
		qsa_score(iq + i * iq_ld, heads, dim, pooled, g, threadIdx.x % 32, scale, scores + i * scores_ld);
}

/* a float's bits, ordered as the floats are (NaN aside) */
__device__ __forceinline__ uint32_t order_key(float f)
{
	uint32_t b = __float_as_uint(f);
	return b & 0x80000000u ? ~b : b | 0x80000000u;
}

#define SEL_THREADS 1024
typedef cub::BlockReduce<int, SEL_THREADS> sel_reduce;
typedef cub::BlockScan<int, SEL_THREADS> sel_scan;

__device__ int count_at_least(const float *scores, uint64_t groups, uint32_t key, bool strict,
			      typename sel_reduce::TempStorage &tmp, int *bcast)
{
	int c = 0;
	for (uint64_t g = threadIdx.x; g < groups; g += SEL_THREADS) {
		uint32_t k = order_key(scores[g]);
		c += strict ? k > key : k >= key;
	}
	c = sel_reduce(tmp).Sum(c);
	if (threadIdx.x == 0)
		*bcast = c;
	__syncthreads();
	c = *bcast;
	__syncthreads();
	return c;
}

/*
 * One block: the keep-th best key by a bitwise search (32 counting passes
 * over the groups), every group strictly above it, then the groups equal to
 * it in ascending order until keep are taken (the tie rule); then the kept
 * groups' rows in chronological order, then the tail.
 */
__device__ __forceinline__ void qsa_pick(const float *scores, uint64_t groups, uint64_t keep, uint64_t ratio,
					 uint64_t visible, int32_t *flags, int32_t *rows, int32_t *count)
{
	__shared__ union {
		typename sel_reduce::TempStorage red;
		typename sel_scan::TempStorage scan;
	} tmp;
	__shared__ int bcast, carry;
	uint32_t kth = 0;
	int need = 0;
	bool all = groups <= keep;

	if (!all) {
		for (int bit = 31; bit >= 0; bit--) {
			uint32_t cand = kth | (1u << bit);
			if ((uint64_t)count_at_least(scores, groups, cand, false, tmp.red, &bcast) >= keep)
				kth = cand;
		}
		need = (int)keep - count_at_least(scores, groups, kth, true, tmp.red, &bcast);
	}
	/* membership, ties at the threshold taken in group order */
	if (threadIdx.x == 0)
		carry = 0;
	__syncthreads();
	for (uint64_t base = 0; base < groups; base += SEL_THREADS) {
		uint64_t g = base + threadIdx.x;
		uint32_t k = g < groups ? order_key(scores[g]) : 0;
		int eq = !all && g < groups && k == kth, before, total;
		sel_scan(tmp.scan).ExclusiveSum(eq, before, total);
		if (g < groups)
			flags[g] = all || k > kth || (eq && carry + before < need);
		__syncthreads();
		if (threadIdx.x == 0)
			carry += total;
		__syncthreads();
	}
	/* emission: kept groups chronologically, expanded, then the raw tail */
	if (threadIdx.x == 0)
		carry = 0;
	__syncthreads();
	for (uint64_t base = 0; base < groups; base += SEL_THREADS) {
		uint64_t g = base + threadIdx.x;
		int f = g < groups ? flags[g] : 0, before, total;
		sel_scan(tmp.scan).ExclusiveSum(f, before, total);
		if (f)
			for (uint64_t r = 0; r < ratio; r++)
				rows[(uint64_t)(carry + before) * ratio + r] = (int32_t)(g * ratio + r);
		__syncthreads();
		if (threadIdx.x == 0)
			carry += total;
		__syncthreads();
	}
	{
		uint64_t n = (uint64_t)carry * ratio;
		for (uint64_t p = groups * ratio + threadIdx.x; p < visible; p += SEL_THREADS)
			rows[n + (p - groups * ratio)] = (int32_t)p;
		if (threadIdx.x == 0)
			*count = (int32_t)(n + (visible > groups * ratio ? visible - groups * ratio : 0));
	}
}

__global__ void __launch_bounds__(SEL_THREADS)
qsa_pick_kernel(const float *scores, uint64_t groups, uint64_t keep, uint64_t ratio, uint64_t visible,
		int32_t *flags, int32_t *rows, int32_t *count)
{
	qsa_pick(scores, groups, keep, ratio, visible, flags, rows, count);
}

/* query blockIdx.x of a batch: its flags share its scores' stride */
__global__ void __launch_bounds__(SEL_THREADS)
qsa_pick_batch_kernel(const float *scores, size_t scores_ld, const uint64_t *groups, const uint64_t *visible,
		      uint64_t keep, uint64_t ratio, int32_t *flags, int32_t *rows, size_t rows_ld, int32_t *count)
{
	size_t i = blockIdx.x;

	qsa_pick(scores + i * scores_ld, groups[i], keep, ratio, visible[i], flags + i * scores_ld,
		 rows + i * rows_ld, count + i);
}

int hbk_qsa_tiles = 1;

extern "C" int hbk_qsa_select_batch(size_t nq, const float *iq, size_t iq_ld, size_t heads, size_t dim,
				    const float *pooled, const uint64_t *groups, const uint64_t *visible,
				    uint64_t most, uint64_t keep, uint64_t ratio, float *scores, size_t scores_ld,
				    int32_t *flags, int32_t *rows, size_t rows_ld, int32_t *count)
{
	float scale = 1.0f / sqrtf((float)dim);

	if (!nq)
		return 0;
	if (most) {
		int rc = hbk_qsa_tiles ? hbk_qsa_score_tiles(nq, iq, iq_ld, heads, dim, pooled, groups, most, scale,
							     scores, scores_ld)
				       : -1;
		if (rc > 0)
			return rc;
		if (rc < 0) {
			dim3 grid((unsigned)((most * 32 + 255) / 256), (unsigned)nq);
			qsa_score_batch_kernel<<<grid, 256>>>(iq, iq_ld, heads, dim, pooled, groups, scale, scores,
							      scores_ld);
		}
	}
	qsa_pick_batch_kernel<<<(unsigned)nq, SEL_THREADS>>>(scores, scores_ld, groups, visible, keep, ratio, flags,
							     rows, rows_ld, count);
	return (int)cudaGetLastError();
}

extern "C" int hbk_qsa_select(const float *iq, size_t heads, size_t dim, const float *pooled, uint64_t groups,
			      uint64_t keep, uint64_t ratio, uint64_t visible, float *scores, int32_t *flags,
			      int32_t *rows, int32_t *count)
{
	float scale = 1.0f / sqrtf((float)dim);

	if (groups) {
		uint64_t threads = groups * 32;
		qsa_score_kernel<<<(unsigned)((threads + 255) / 256), 256>>>(iq, heads, dim, pooled, groups, scale,
									  scores);
	}
	qsa_pick_kernel<<<1, SEL_THREADS>>>(scores, groups, keep, ratio, visible, flags, rows, count);
	return (int)cudaGetLastError();
}

/* ---------------------------------------------------------------- gathered attention */

#define ATT_WARPS 8

/* PL values of the head per lane; warp w takes rows w, w + 8, ...; each warp
 * keeps a running max, sum and weighted values, merged at the end */
template <int PL>
__device__ __forceinline__ void attend(const float *q, const float *K, const float *V, const int32_t *rows,
				       size_t stride, size_t dim, float scale, size_t n, float *out)
{
	__shared__ float wm[ATT_WARPS], wl[ATT_WARPS];
	__shared__ float wacc[ATT_WARPS][PL * 32];
	unsigned lane = threadIdx.x % 32, w = threadIdx.x / 32;
	float m = -INFINITY, l = 0, acc[PL], qv[PL];

	for (int p = 0; p < PL; p++) {
		size_t d = lane + 32 * p;
		acc[p] = 0;
		qv[p] = d < dim ? q[d] : 0;
	}
	for (size_t i = w; i < n; i += ATT_WARPS) {
		const float *kr = K + (size_t)(rows ? rows[i] : (int32_t)i) * stride;
		const float *vr = V + (size_t)(rows ? rows[i] : (int32_t)i) * stride;
		float s = 0, mn, corr, e;
		for (int p = 0; p < PL; p++) {
			size_t d = lane + 32 * p;
			if (d < dim)
				s = fmaf(qv[p], kr[d], s);
		}
		for (int off = 16; off; off >>= 1)
			s += __shfl_xor_sync(0xffffffffu, s, off);
		s *= scale;
		mn = s > m ? s : m;
		corr = expf(m - mn);
		e = expf(s - mn);
		l = l * corr + e;
		for (int p = 0; p < PL; p++) {
			size_t d = lane + 32 * p;
			acc[p] = acc[p] * corr + (d < dim ? e * vr[d] : 0);
		}
		m = mn;
	}
	if (lane == 0)
		wm[w] = m, wl[w] = l;
	for (int p = 0; p < PL; p++)
		wacc[w][lane + 32 * p] = acc[p];
	__syncthreads();
	if (w == 0) {
		float M = -INFINITY, Lsum = 0;
		for (int i = 0; i < ATT_WARPS; i++)
			M = wm[i] > M ? wm[i] : M;
		for (int i = 0; i < ATT_WARPS; i++)
			Lsum += wm[i] == -INFINITY ? 0 : wl[i] * expf(wm[i] - M);
		for (int p = 0; p < PL; p++) {
			size_t d = lane + 32 * p;
			float a = 0;
			for (int i = 0; i < ATT_WARPS; i++)
				a += wm[i] == -INFINITY ? 0 : wacc[i][lane + 32 * p] * expf(wm[i] - M);
			if (d < dim)
				out[d] = a / Lsum;
		}
	}
}

template <int PL>
__global__ void __launch_bounds__(ATT_WARPS * 32)
attend_kernel(const float *q, const float *K, const float *V, size_t dim, float scale, size_t n, float *out)
{
	attend<PL>(q, K, V, nullptr, dim, dim, scale, n, out);
}

/* (query, head) = (blockIdx.x / heads, blockIdx.x % heads) of a batch */
template <int PL>
__global__ void __launch_bounds__(ATT_WARPS * 32)
attend_batch_kernel(struct hbk_attn a)
{
	size_t i = blockIdx.x / a.heads, h = blockIdx.x % a.heads, off = (h / a.per_kv) * a.dim;

	attend<PL>(a.q + i * a.q_ld + h * a.qh_ld, a.K + off, a.V + off, a.rows + i * a.rows_ld, a.stride, a.dim,
		   a.scale, (size_t)a.n[i], a.out + i * a.out_ld + h * a.dim);
}

extern "C" int hbk_attend_batch(const struct hbk_attn *a)
{
	unsigned t = ATT_WARPS * 32, blocks = (unsigned)(a->nq * a->heads);
	bool head, group;
	int rc;

	if (!blocks)
		return 0;
	/* the tensor-core kernel where it takes the shape, else the grouped
	 * one; HB_CUDA_ATTEND=group keeps the grouped float32 kernel,
	 * HB_CUDA_ATTEND=head the per-head one (the A/B of tests and
	 * benchmarks) */
	head = env_is("HB_CUDA_ATTEND", "head"), group = env_is("HB_CUDA_ATTEND", "group");
	if (!head && !group && (rc = hbk_attend_mma(a)) != -1)
		return rc;
	if (!head && (rc = hbk_attend_group(a)) != -1)
		return rc;
	if (a->dim <= 128)
		attend_batch_kernel<4><<<blocks, t>>>(*a);
	else if (a->dim <= 256)
		attend_batch_kernel<8><<<blocks, t>>>(*a);
	else if (a->dim <= 512)
		attend_batch_kernel<16><<<blocks, t>>>(*a);
	else if (a->dim <= HBK_ATTEND_MAXDIM)
		attend_batch_kernel<32><<<blocks, t>>>(*a);
	else
		return (int)cudaErrorInvalidValue;
	return (int)cudaGetLastError();
}

extern "C" int hbk_attend(const float *q, const float *K, const float *V, size_t dim, float scale, size_t n,
			  float *out)
{
	unsigned t = ATT_WARPS * 32;

	if (dim <= 128)
		attend_kernel<4><<<1, t>>>(q, K, V, dim, scale, n, out);
	else if (dim <= 256)
		attend_kernel<8><<<1, t>>>(q, K, V, dim, scale, n, out);
	else if (dim <= 512)
		attend_kernel<16><<<1, t>>>(q, K, V, dim, scale, n, out);
	else if (dim <= HBK_ATTEND_MAXDIM)
		attend_kernel<32><<<1, t>>>(q, K, V, dim, scale, n, out);
	else
		return (int)cudaErrorInvalidValue;
	return (int)cudaGetLastError();
}

/*
 * hb_cuda_attn_mma.cu: gathered attention on the tensor cores
 * (hbk_attend_mma; hbk_attend_batch takes it where it fits).
 *
 * Why: the grouped kernel (hb_cuda_attn.cu) scores and sums in float32 on
 * the CUDA cores, bound by its shared-memory reads (28 ms of a 187 ms
 * chunk at T = 4,096).  Here a block is still one (query, K/V head): its
 * query heads (at most 16) are the M = 16 rows of m16n8k16 products, a
 * tile of 32 gathered rows the N of the scores and the K of the values.
 *
 * Numerics: every float32 operand (queries, keys, values, weights) enters
 * as two bf16 terms, hi = bf16(x) and lo = bf16(x - hi), which hold x to
 * within 2^-16 |x| (the device graph's products split their activations
 * the same way); a product takes hi.hi + hi.lo + lo.hi (lo.lo is below
 * that), each exact, summed in float32.  So a score is within about
 * 3 2^-16 scale sum_d |q_d k_d| of the float32 one, an output within
 * 3 2^-16 sum_r p_r |v_r| plus what the scores' error moves the weights;
 * test_cuda_chunk bounds it against the CPU.  The softmax is the grouped
 * kernel's (online, expf, one division at the end).
 *
 * Scores: warp w takes the 8 rows (w % 4) of the tile and half (w / 4) of
 * the head width, the halves added in shared memory.  Values: warp w
 * takes 32 output columns; the weights' and values' fragments come from
 * [head][row] and [row][column] tiles (ldmatrix, .trans for the values).
 */
#include "hb_cuda_kern.h"
#include "hb_cuda_mma_ops.cuh"
#include "hb_cuda_online.cuh"

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define AM_THREADS 256
#define AM_ROWS 32   /* gathered rows a tile */
#define AM_HEADS 16  /* the query heads of a K/V head, padded to 16 */
#define AM_DIM 256   /* at most this head width, a multiple of 16 */
#define AM_DP (AM_DIM + 8) /* a staged row in bf16: 528 bytes, rows in distinct banks */
#define AM_PP (AM_ROWS + 8)

/* QN queries whose gathered rows are prefixes of the last one's share
 * each K/V tile (hbk_attn.prefix); QN = 1 is the kernel of one query */
template <int QN> struct am_smem {
	__nv_bfloat16 q[QN][2][AM_HEADS][AM_DP]; /* each query's heads' terms, hi then lo */
	__nv_bfloat16 k[2][AM_ROWS][AM_DP];      /* the tile's keys' terms */
	__nv_bfloat16 v[2][AM_ROWS][AM_DP];      /* its values' terms */
	__nv_bfloat16 p[QN][2][AM_HEADS][AM_PP]; /* the weights' terms */
	float s[QN][2][AM_HEADS][AM_ROWS];       /* scores, each half of the width */
	float m[QN][AM_HEADS], l[QN][AM_HEADS], corr[QN][AM_HEADS];
};

/* four floats as bf16 terms into row r, column c of t */
__device__ __forceinline__ void am_store(__nv_bfloat16 (*t)[AM_ROWS][AM_DP], int r, int c, float4 x)
{
	uint32_t h[2], l[2];

	split2(x.x, x.y, h[0], l[0]);
	split2(x.z, x.w, h[1], l[1]);
	*(uint2 *)&t[0][r][c] = make_uint2(h[0], h[1]);
	*(uint2 *)&t[1][r][c] = make_uint2(l[0], l[1]);
}

/* gathered row r0 + r of K or V from base (zeros past n), columns c .. c + 3 */
__device__ __forceinline__ float4 am_fetch(const float *base, const int32_t *rows, size_t stride, int r0, int r,
					   int n, int c)
{
	return r0 + r < n ? *(const float4 *)(base + (size_t)rows[r0 + r] * stride + c) : make_float4(0, 0, 0, 0);
}

/*
 * rows [r0, r0 + AM_ROWS) of K and of V (the gathered ones; zeros past n)
 * as bf16 terms into tk and tv, four floats a thread at a time.  With the
 * width known (DIM > 0) the loop is unrolled whole and every load of the
 * tile issued before the first conversion, so that their latencies
 * overlap rather than follow one another; else (DIM 0) it walks dim4.
 */
template <int DIM>
__device__ __forceinline__ void am_load(__nv_bfloat16 (*tk)[AM_ROWS][AM_DP], __nv_bfloat16 (*tv)[AM_ROWS][AM_DP],
					const float *K, const float *V, const int32_t *rows, size_t stride, int r0,
					int n, int dim4)
{
	if constexpr (DIM > 0) {
		constexpr int D4 = DIM / 4, PER = AM_ROWS * D4 / AM_THREADS;
		static_assert(PER * AM_THREADS == AM_ROWS * D4, "a tile splits evenly over the block");
		float4 xk[PER], xv[PER];
#pragma unroll
		for (int p = 0; p < PER; p++) {
			int e = p * AM_THREADS + (int)threadIdx.x, r = e / D4, c = 4 * (e % D4);
			xk[p] = am_fetch(K, rows, stride, r0, r, n, c);
			xv[p] = am_fetch(V, rows, stride, r0, r, n, c);
		}
#pragma unroll
		for (int p = 0; p < PER; p++) {
			int e = p * AM_THREADS + (int)threadIdx.x, r = e / D4, c = 4 * (e % D4);
			am_store(tk, r, c, xk[p]);
			am_store(tv, r, c, xv[p]);
		}
	} else {
		for (int e = threadIdx.x; e < AM_ROWS * dim4; e += AM_THREADS) {
			int r = e / dim4, c = 4 * (e % dim4);
			am_store(tk, r, c, am_fetch(K, rows, stride, r0, r, n, c));
			am_store(tv, r, c, am_fetch(V, rows, stride, r0, r, n, c));
		}
	}
}

/*
 * block (queries i0 .. i0 + QN - 1, K/V head g): heads g * per_kv .. of
 * each query over its n gathered rows (DIM: the width when known at
 * compile time, else 0).  With QN > 1 the block's queries lie in
 * [first, end) of the prefix (hbk_attn.prefix), and the block walks the
 * rows of its last query, the longest: query j takes part in a tile only
 * while the tile starts before its own count, its rows past that count are
 * masked as those past the end are, so every query sees the operations of
 * the one-query block in the same order (its results are the same bits).
 * The prefix property is checked as the rows are read: a row that differs
 * from the last query's sets *a.bad.
 */
template <int DIM, int QN>
__global__ void __launch_bounds__(AM_THREADS, QN == 1 ? 2 : 1)
	attend_mma_kernel(struct hbk_attn a, size_t first, size_t end)
{
	extern __shared__ float4 am_raw[];
	struct am_smem<QN> *sm = (struct am_smem<QN> *)am_raw;
	size_t nkv = a.heads / a.per_kv, g = blockIdx.x % nkv, i0 = first + blockIdx.x / nkv * QN;
	int qv = end - i0 < (size_t)QN ? (int)(end - i0) : QN; /* the block's queries */
	size_t il = i0 + (size_t)qv - 1;
	int hg = (int)a.per_kv, dim = (int)a.dim, dim4 = dim / 4, n = a.n[il], ks = dim / 16;
	int lane = threadIdx.x % 32, w = threadIdx.x / 32;
	int nj[QN];
	const int32_t *rows = a.rows + il * a.rows_ld;
	const float *K = a.K + g * a.dim, *V = a.V + g * a.dim;
	/* scores: rows 8 (w % 4) .. of the tile, k steps [k0, k1) */
	int sn = w % 4, k0 = w / 4 ? ks / 2 : 0, k1 = w / 4 ? ks : ks / 2;
	/* values: output columns 32 w .. 32 w + 31 (4 tiles of 8), where < dim */
	bool vcols = 32 * w < dim;
	float acc[QN][4][4];

#pragma unroll
	for (int j = 0; j < QN; j++) {
		nj[j] = j < qv ? a.n[i0 + j] : 0;
		if (QN > 1 && nj[j] > n && threadIdx.x == 0)
			*a.bad = 1; /* not a prefix of the last query's rows */
#pragma unroll
		for (int t = 0; t < 4; t++)
			acc[j][t][0] = acc[j][t][1] = acc[j][t][2] = acc[j][t][3] = 0;
	}
	for (int e = threadIdx.x; e < QN * AM_HEADS * dim4; e += AM_THREADS) {
		int j = e / (AM_HEADS * dim4), h = e / dim4 % AM_HEADS, c = 4 * (e % dim4);
		float4 x = make_float4(0, 0, 0, 0);
		uint32_t hi[2], lo[2];
		if (h < hg && j < qv)
			x = *(const float4 *)(a.q + (i0 + (size_t)j) * a.q_ld + (g * a.per_kv + h) * a.qh_ld + c);
		split2(x.x, x.y, hi[0], lo[0]);
		split2(x.z, x.w, hi[1], lo[1]);
		*(uint2 *)&sm->q[j][0][h][c] = make_uint2(hi[0], hi[1]);
		*(uint2 *)&sm->q[j][1][h][c] = make_uint2(lo[0], lo[1]);
	}
	if (threadIdx.x < QN * AM_HEADS)
		sm->m[threadIdx.x / AM_HEADS][threadIdx.x % AM_HEADS] = -INFINITY,
		sm->l[threadIdx.x / AM_HEADS][threadIdx.x % AM_HEADS] = 0;
	for (int r0 = 0; r0 < n; r0 += AM_ROWS) {
		am_load<DIM>(sm->k, sm->v, K, V, rows, a.stride, r0, n, dim4);
		if (QN > 1)
			for (int e = threadIdx.x; e < (qv - 1) * AM_ROWS; e += AM_THREADS) {
				int j = e / AM_ROWS, r = r0 + e % AM_ROWS;
				if (r < a.n[i0 + j] && a.rows[(i0 + j) * a.rows_ld + r] != rows[r])
					*a.bad = 1;
			}
		__syncthreads();
		{
			/* A: the heads' terms, [head][dim]; B: the keys' terms, [row][dim] */
			uint32_t ka = smem_u32(&sm->k[0][8 * sn + (lane & 7)][((lane >> 3) & 1) * 8]);
			const uint32_t qt = sizeof(sm->q[0][0]), kt = sizeof(sm->k[0]);
			float c[QN][4];
#pragma unroll
			for (int j = 0; j < QN; j++)
				c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0;
			for (int kk = k0; kk < k1; kk++) {
				uint32_t bh[2], bl[2];
				ldsm_x2(ka + kk * 32, bh);
				ldsm_x2(ka + kt + kk * 32, bl);
#pragma unroll
				for (int j = 0; j < QN; j++) {
					uint32_t ah[4], al[4];
					uint32_t qa = smem_u32(&sm->q[j][0][lane & 15][(lane >> 4) * 8]);
					if (r0 >= nj[j])
						continue;
					ldsm_x4(qa + kk * 32, ah);
					ldsm_x4(qa + qt + kk * 32, al);
					mma_bf16(c[j], al, bh[0], bh[1]); /* the small terms first */
					mma_bf16(c[j], ah, bl[0], bl[1]);
					mma_bf16(c[j], ah, bh[0], bh[1]);
				}
			}
			int hr = lane >> 2, cr = 8 * sn + (lane & 3) * 2;
#pragma unroll
			for (int j = 0; j < QN; j++) {
				float *s = &sm->s[j][w / 4][0][0];
				s[hr * AM_ROWS + cr] = c[j][0], s[hr * AM_ROWS + cr + 1] = c[j][1];
				s[(hr + 8) * AM_ROWS + cr] = c[j][2], s[(hr + 8) * AM_ROWS + cr + 1] = c[j][3];
			}
		}
		__syncthreads();
		/* the online softmax: warp w takes heads w and w + 8, lane = row */
#pragma unroll
		for (int j = 0; j < QN; j++) {
			if (r0 >= nj[j])
				continue;
			for (int h = w; h < AM_HEADS; h += AM_THREADS / 32) {
				float e = 0;
				if (h < hg) {
					float s = r0 + lane < nj[j] ? (sm->s[j][0][h][lane] + sm->s[j][1][h][lane]) * a.scale
								    : -INFINITY;
					e = online_step(s, &sm->m[j][h], &sm->l[j][h], &sm->corr[j][h], lane);
				} else if (lane == 0) {
					sm->corr[j][h] = 0; /* a padding head: its rows stay zero */
				}
				__nv_bfloat16 eh = __float2bfloat16_rn(e);
				sm->p[j][0][h][lane] = eh;
				sm->p[j][1][h][lane] = __float2bfloat16_rn(e - __bfloat162float(eh));
			}
		}
		__syncthreads();
		if (vcols) {
			/* A: the weights' terms, [head][row]; B: the values' terms, [row][column], transposed */
			uint32_t va = smem_u32(&sm->v[0][(lane & 7) + ((lane >> 3) & 1) * 8][32 * w + (lane >> 4) * 8]);
			const uint32_t pt = sizeof(sm->p[0][0]), vt = sizeof(sm->v[0]);
#pragma unroll
			for (int j = 0; j < QN; j++) {
				if (r0 >= nj[j])
					continue;
				float c0 = sm->corr[j][lane >> 2], c1 = sm->corr[j][(lane >> 2) + 8];
				for (int t = 0; t < 4; t++)
					acc[j][t][0] *= c0, acc[j][t][1] *= c0, acc[j][t][2] *= c1, acc[j][t][3] *= c1;
			}
			for (int kk = 0; kk < AM_ROWS / 16; kk++) {
				uint32_t ah[QN][4], al[QN][4];
#pragma unroll
				for (int j = 0; j < QN; j++) {
					uint32_t pa = smem_u32(&sm->p[j][0][lane & 15][(lane >> 4) * 8]);
					if (r0 >= nj[j])
						continue;
					ldsm_x4(pa + kk * 32, ah[j]);
					ldsm_x4(pa + pt + kk * 32, al[j]);
				}
				for (int t2 = 0; t2 < 2; t2++) { /* output tiles 2 t2 and 2 t2 + 1 */
					uint32_t bh[4], bl[4];
					uint32_t at = va + (kk * 16 * AM_DP + 16 * t2) * 2;
					ldsm_x4_trans(at, bh);
					ldsm_x4_trans(at + vt, bl);
#pragma unroll
					for (int j = 0; j < QN; j++) {
						if (r0 >= nj[j])
							continue;
						for (int u = 0; u < 2; u++) {
							float(&d)[4] = acc[j][2 * t2 + u];
							mma_bf16(d, al[j], bh[2 * u], bh[2 * u + 1]);
							mma_bf16(d, ah[j], bl[2 * u], bl[2 * u + 1]);
							mma_bf16(d, ah[j], bh[2 * u], bh[2 * u + 1]);
						}
					}
				}
			}
		}
		__syncthreads(); /* k, v, s and p are the next tile's after this */
	}
	if (vcols) {
		int h0 = lane >> 2;
#pragma unroll
		for (int j = 0; j < QN; j++) {
			if (j >= qv)
				continue;
			for (int t = 0; t < 4; t++) {
				int col = 32 * w + 8 * t + (lane & 3) * 2;
				for (int half = 0; half < 2; half++) {
					int h = h0 + 8 * half;
					if (h < hg && col < dim) {
						float *out = a.out + (i0 + (size_t)j) * a.out_ld + (g * a.per_kv + h) * a.dim + col;
						float l = sm->l[j][h];
						out[0] = acc[j][t][2 * half] / l;
						out[1] = acc[j][t][2 * half + 1] / l;
					}
				}
			}
		}
	}
}

/* queries [first, end) in blocks of QN */
template <int DIM, int QN> static int go(const struct hbk_attn *a, size_t first, size_t end)
{
	size_t nkv = a->heads / a->per_kv, blocks = (end - first + QN - 1) / QN * nkv;
	/* set each launch: a context made anew (hb_cuda_start after stop) starts without it */
	cudaError_t e = cudaFuncSetAttribute(attend_mma_kernel<DIM, QN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
					     (int)sizeof(struct am_smem<QN>));

	if (e != cudaSuccess)
		return (int)e;
	if (!blocks)
		return 0;
	attend_mma_kernel<DIM, QN><<<(unsigned)blocks, AM_THREADS, sizeof(struct am_smem<QN>)>>>(*a, first, end);
	return (int)cudaGetLastError();
}

/* how many queries of the prefix share a block: HB_CUDA_ATTEND_SHARE=2 or
 * 4 (the A/B of tests and benchmarks); otherwise 1, none, until the device
 * has measured the shared blocks */
static int share_count(void)
{
	const char *v = getenv("HB_CUDA_ATTEND_SHARE");

	if (v && !strcmp(v, "4"))
		return 4;
	if (v && !strcmp(v, "2"))
		return 2;
	return 1;
}

template <int DIM> static int go_all(const struct hbk_attn *a)
{
	size_t pre = a->prefix < a->nq ? a->prefix : a->nq;
	int share = a->bad && pre > 1 ? share_count() : 1, rc = 0;

	if (share == 4)
		rc = go<DIM, 4>(a, 0, pre);
	else if (share == 2)
		rc = go<DIM, 2>(a, 0, pre);
	else
		pre = 0;
	return rc ? rc : go<DIM, 1>(a, pre, a->nq);
}

/* -1: the shape is not this kernel's (the caller takes another) */
extern "C" int hbk_attend_mma(const struct hbk_attn *a)
{
	if (a->per_kv < 1 || a->per_kv > AM_HEADS || a->heads % a->per_kv || a->dim > AM_DIM || a->dim % 16 ||
	    !hbk_attn_float4(a))
		return -1;
	if (!a->nq)
		return 0;
	/* the model's width (256) unrolled; others walk it */
	return a->dim == 256 ? go_all<256>(a) : go_all<0>(a);
}

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

#define AM_THREADS 256
#define AM_ROWS 32   /* gathered rows a tile */
#define AM_HEADS 16  /* the query heads of a K/V head, padded to 16 */
#define AM_DIM 256   /* at most this head width, a multiple of 16 */
#define AM_DP (AM_DIM + 8) /* a staged row in bf16: 528 bytes, rows in distinct banks */
#define AM_PP (AM_ROWS + 8)

struct am_smem {
	__nv_bfloat16 q[2][AM_HEADS][AM_DP];  /* the query heads' terms, hi then lo */
	__nv_bfloat16 k[2][AM_ROWS][AM_DP];   /* the tile's keys' terms */
	__nv_bfloat16 v[2][AM_ROWS][AM_DP];   /* its values' terms */
	__nv_bfloat16 p[2][AM_HEADS][AM_PP];  /* the weights' terms */
	float s[2][AM_HEADS][AM_ROWS];        /* scores, each half of the width */
	float m[AM_HEADS], l[AM_HEADS], corr[AM_HEADS];
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

/* block (query i, K/V head g): heads g * per_kv .. of query i over its n
 * gathered rows (DIM: the width when known at compile time, else 0) */
template <int DIM>
__global__ void __launch_bounds__(AM_THREADS, 2) attend_mma_kernel(struct hbk_attn a)
{
	extern __shared__ float4 am_raw[];
	struct am_smem *sm = (struct am_smem *)am_raw;
	size_t i = blockIdx.x / (a.heads / a.per_kv), g = blockIdx.x % (a.heads / a.per_kv);
	int hg = (int)a.per_kv, dim = (int)a.dim, dim4 = dim / 4, n = a.n[i], ks = dim / 16;
	int lane = threadIdx.x % 32, w = threadIdx.x / 32;
	const int32_t *rows = a.rows + i * a.rows_ld;
	const float *K = a.K + g * a.dim, *V = a.V + g * a.dim;
	/* scores: rows 8 (w % 4) .. of the tile, k steps [k0, k1) */
	int sn = w % 4, k0 = w / 4 ? ks / 2 : 0, k1 = w / 4 ? ks : ks / 2;
	/* values: output columns 32 w .. 32 w + 31 (4 tiles of 8), where < dim */
	bool vcols = 32 * w < dim;
	float acc[4][4] = { { 0 } };

	for (int e = threadIdx.x; e < AM_HEADS * dim4; e += AM_THREADS) {
		int h = e / dim4, c = 4 * (e % dim4);
		float4 x = make_float4(0, 0, 0, 0);
		uint32_t hi[2], lo[2];
		if (h < hg)
			x = *(const float4 *)(a.q + i * a.q_ld + (g * a.per_kv + h) * a.qh_ld + c);
		split2(x.x, x.y, hi[0], lo[0]);
		split2(x.z, x.w, hi[1], lo[1]);
		*(uint2 *)&sm->q[0][h][c] = make_uint2(hi[0], hi[1]);
		*(uint2 *)&sm->q[1][h][c] = make_uint2(lo[0], lo[1]);
	}
	if (threadIdx.x < AM_HEADS)
		sm->m[threadIdx.x] = -INFINITY, sm->l[threadIdx.x] = 0;
	for (int r0 = 0; r0 < n; r0 += AM_ROWS) {
		am_load<DIM>(sm->k, sm->v, K, V, rows, a.stride, r0, n, dim4);
		__syncthreads();
		{
			/* A: the heads' terms, [head][dim]; B: the keys' terms, [row][dim] */
			uint32_t qa = smem_u32(&sm->q[0][lane & 15][(lane >> 4) * 8]);
			uint32_t ka = smem_u32(&sm->k[0][8 * sn + (lane & 7)][((lane >> 3) & 1) * 8]);
			const uint32_t qt = sizeof(sm->q[0]), kt = sizeof(sm->k[0]);
			float c[4] = { 0, 0, 0, 0 };
			for (int kk = k0; kk < k1; kk++) {
				uint32_t ah[4], al[4], bh[2], bl[2];
				ldsm_x4(qa + kk * 32, ah);
				ldsm_x4(qa + qt + kk * 32, al);
				ldsm_x2(ka + kk * 32, bh);
				ldsm_x2(ka + kt + kk * 32, bl);
				mma_bf16(c, al, bh[0], bh[1]); /* the small terms first */
				mma_bf16(c, ah, bl[0], bl[1]);
				mma_bf16(c, ah, bh[0], bh[1]);
			}
			int hr = lane >> 2, cr = 8 * sn + (lane & 3) * 2;
			float *s = &sm->s[w / 4][0][0];
			s[hr * AM_ROWS + cr] = c[0], s[hr * AM_ROWS + cr + 1] = c[1];
			s[(hr + 8) * AM_ROWS + cr] = c[2], s[(hr + 8) * AM_ROWS + cr + 1] = c[3];
		}
		__syncthreads();
		/* the online softmax: warp w takes heads w and w + 8, lane = row */
		for (int h = w; h < AM_HEADS; h += AM_THREADS / 32) {
			float e = 0;
			if (h < hg) {
				float s = r0 + lane < n ? (sm->s[0][h][lane] + sm->s[1][h][lane]) * a.scale : -INFINITY;
				e = online_step(s, &sm->m[h], &sm->l[h], &sm->corr[h], lane);
			} else if (lane == 0) {
				sm->corr[h] = 0; /* a padding head: its rows stay zero */
			}
			__nv_bfloat16 eh = __float2bfloat16_rn(e);
			sm->p[0][h][lane] = eh;
			sm->p[1][h][lane] = __float2bfloat16_rn(e - __bfloat162float(eh));
		}
		__syncthreads();
		if (vcols) {
			/* A: the weights' terms, [head][row]; B: the values' terms, [row][column], transposed */
			uint32_t pa = smem_u32(&sm->p[0][lane & 15][(lane >> 4) * 8]);
			uint32_t va = smem_u32(&sm->v[0][(lane & 7) + ((lane >> 3) & 1) * 8][32 * w + (lane >> 4) * 8]);
			const uint32_t pt = sizeof(sm->p[0]), vt = sizeof(sm->v[0]);
			float c0 = sm->corr[lane >> 2], c1 = sm->corr[(lane >> 2) + 8];
			for (int t = 0; t < 4; t++)
				acc[t][0] *= c0, acc[t][1] *= c0, acc[t][2] *= c1, acc[t][3] *= c1;
			for (int kk = 0; kk < AM_ROWS / 16; kk++) {
				uint32_t ah[4], al[4];
				ldsm_x4(pa + kk * 32, ah);
				ldsm_x4(pa + pt + kk * 32, al);
				for (int t2 = 0; t2 < 2; t2++) { /* output tiles 2 t2 and 2 t2 + 1 */
					uint32_t bh[4], bl[4];
					uint32_t at = va + (kk * 16 * AM_DP + 16 * t2) * 2;
					ldsm_x4_trans(at, bh);
					ldsm_x4_trans(at + vt, bl);
					for (int u = 0; u < 2; u++) {
						float(&d)[4] = acc[2 * t2 + u];
						mma_bf16(d, al, bh[2 * u], bh[2 * u + 1]);
						mma_bf16(d, ah, bl[2 * u], bl[2 * u + 1]);
						mma_bf16(d, ah, bh[2 * u], bh[2 * u + 1]);
					}
				}
			}
		}
		__syncthreads(); /* k, v, s and p are the next tile's after this */
	}
	if (vcols) {
		int h0 = lane >> 2;
		for (int t = 0; t < 4; t++) {
			int col = 32 * w + 8 * t + (lane & 3) * 2;
			for (int half = 0; half < 2; half++) {
				int h = h0 + 8 * half;
				if (h < hg && col < dim) {
					float *out = a.out + i * a.out_ld + (g * a.per_kv + h) * a.dim + col;
					float l = sm->l[h];
					out[0] = acc[t][2 * half] / l;
					out[1] = acc[t][2 * half + 1] / l;
				}
			}
		}
	}
}

template <int DIM> static int go(const struct hbk_attn *a, unsigned blocks)
{
	/* set each launch: a context made anew (hb_cuda_start after stop) starts without it */
	cudaError_t e = cudaFuncSetAttribute(attend_mma_kernel<DIM>, cudaFuncAttributeMaxDynamicSharedMemorySize,
					     (int)sizeof(struct am_smem));

	if (e != cudaSuccess)
		return (int)e;
	attend_mma_kernel<DIM><<<blocks, AM_THREADS, sizeof(struct am_smem)>>>(*a);
	return (int)cudaGetLastError();
}

/* -1: the shape is not this kernel's (the caller takes another) */
extern "C" int hbk_attend_mma(const struct hbk_attn *a)
{
	unsigned blocks;

	if (a->per_kv < 1 || a->per_kv > AM_HEADS || a->heads % a->per_kv || a->dim > AM_DIM || a->dim % 16 ||
	    !hbk_attn_float4(a))
		return -1;
	blocks = (unsigned)(a->nq * (a->heads / a->per_kv));
	if (!blocks)
		return 0;
	/* the model's width (256) unrolled; others walk it */
	return a->dim == 256 ? go<256>(a, blocks) : go<0>(a, blocks);
}

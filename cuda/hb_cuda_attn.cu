/*
 * hb_cuda_attn.cu: gathered attention with the query heads of one K/V head
 * together (hbk_attend_group; hbk_attend_batch takes it where it fits).
 *
 * Why: the per-head kernel (hb_cuda_kern.cu) gives each (query, head) its
 * own block, and each block reads its query's gathered K and V rows on its
 * own: with 16 query heads to a K/V head, every row crosses from L2 sixteen
 * times.  Here one block is one (query, K/V head): it reads each gathered
 * row once into shared memory, tile by tile, and every head of the group
 * scores it and takes its value from there.
 *
 * Numerics are the per-head kernel's kind: float32 dot products (in a
 * different order), an online softmax with expf, one division at the end;
 * the result differs from the reference by rounding only (the parity tests
 * bound it).
 */
#include "hb_cuda_kern.h"
#include "hb_cuda_online.cuh"

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#define AG_THREADS 256
#define AG_ROWS 32   /* gathered rows a tile */
#define AG_HEADS 16  /* at most this many query heads to a K/V head */
#define AG_DIM 256   /* at most this head width */
#define AG_PAD 4     /* a tile row's padding: rows start in different banks */

struct ag_smem {
	float q[AG_HEADS][AG_DIM];
	float kv[AG_ROWS][AG_DIM + AG_PAD];  /* the tile's K rows, then its V rows */
	float p[AG_HEADS][AG_ROWS];          /* scores, then their weights */
	float m[AG_HEADS], l[AG_HEADS], corr[AG_HEADS];
};

/* the tile's rows [r0, r0 + AG_ROWS) of K or V into shared memory, float4 at a time */
__device__ __forceinline__ void ag_load(struct ag_smem *sm, const float *base, const int32_t *rows, size_t stride,
					int r0, int n, int dim4)
{
	for (int e = threadIdx.x; e < AG_ROWS * dim4; e += AG_THREADS) {
		int r = e / dim4, c = e % dim4;
		float4 v = make_float4(0, 0, 0, 0);
		if (r0 + r < n)
			v = *(const float4 *)(base + (size_t)rows[r0 + r] * stride + 4 * c);
		*(float4 *)&sm->kv[r][4 * c] = v;
	}
}

/* block (query i, K/V head g): heads g * per_kv .. of query i over its n gathered rows */
__global__ void __launch_bounds__(AG_THREADS) attend_group_kernel(struct hbk_attn a)
{
	extern __shared__ float4 ag_raw[];
	struct ag_smem *sm = (struct ag_smem *)ag_raw;
	size_t i = blockIdx.x / (a.heads / a.per_kv), g = blockIdx.x % (a.heads / a.per_kv);
	int hg = (int)a.per_kv, dim = (int)a.dim, dim4 = dim / 4, n = a.n[i];
	const int32_t *rows = a.rows + i * a.rows_ld;
	const float *K = a.K + g * a.dim, *V = a.V + g * a.dim;
	/* the scores: thread t takes head t / 16 against rows t % 16 and t % 16 + 16 */
	int sh = threadIdx.x / 16, sr = threadIdx.x % 16;
	/* the values: thread t takes dims 4 (t % 64) .. +3 of heads 4 (t / 64) .. +3 */
	int vd = 4 * (threadIdx.x % 64), vh = 4 * (threadIdx.x / 64);
	float acc[4][4] = { { 0 } };

	for (int e = threadIdx.x; e < hg * dim4; e += AG_THREADS) {
		int h = e / dim4, c = e % dim4;
		*(float4 *)&sm->q[h][4 * c] = *(const float4 *)(a.q + i * a.q_ld + (g * a.per_kv + h) * a.qh_ld + 4 * c);
	}
	if (threadIdx.x < AG_HEADS)
		sm->m[threadIdx.x] = -INFINITY, sm->l[threadIdx.x] = 0;
	for (int r0 = 0; r0 < n; r0 += AG_ROWS) {
		ag_load(sm, K, rows, a.stride, r0, n, dim4);
		__syncthreads();
		if (sh < hg) {
			float s0 = 0, s1 = 0;
			for (int c = 0; c < dim4; c++) {
				float4 q = *(const float4 *)&sm->q[sh][4 * c];
				float4 k0 = *(const float4 *)&sm->kv[sr][4 * c], k1 = *(const float4 *)&sm->kv[sr + 16][4 * c];
				s0 = fmaf(q.x, k0.x, s0), s0 = fmaf(q.y, k0.y, s0), s0 = fmaf(q.z, k0.z, s0), s0 = fmaf(q.w, k0.w, s0);
				s1 = fmaf(q.x, k1.x, s1), s1 = fmaf(q.y, k1.y, s1), s1 = fmaf(q.z, k1.z, s1), s1 = fmaf(q.w, k1.w, s1);
			}
			sm->p[sh][sr] = r0 + sr < n ? s0 * a.scale : -INFINITY;
			sm->p[sh][sr + 16] = r0 + sr + 16 < n ? s1 * a.scale : -INFINITY;
		}
		__syncthreads();
		/* the online softmax: warp w takes heads w and w + 8, lane = row */
		for (int h = threadIdx.x / 32; h < hg; h += AG_THREADS / 32) {
			int lane = threadIdx.x % 32;
			sm->p[h][lane] = online_step(sm->p[h][lane], &sm->m[h], &sm->l[h], &sm->corr[h], lane);
		}
		ag_load(sm, V, rows, a.stride, r0, n, dim4); /* the scores are read from p now, not from kv */
		__syncthreads();
		if (vd < dim) {
			for (int hh = 0; hh < 4; hh++) {
				float c = sm->corr[vh + hh]; /* a head past the group's: never written out */
				for (int d = 0; d < 4; d++)
					acc[hh][d] *= c;
			}
			for (int r = 0; r < AG_ROWS; r++) {
				float4 v = *(const float4 *)&sm->kv[r][vd];
				for (int hh = 0; hh < 4; hh++) {
					float w = sm->p[vh + hh][r];
					acc[hh][0] = fmaf(w, v.x, acc[hh][0]), acc[hh][1] = fmaf(w, v.y, acc[hh][1]);
					acc[hh][2] = fmaf(w, v.z, acc[hh][2]), acc[hh][3] = fmaf(w, v.w, acc[hh][3]);
				}
			}
		}
		__syncthreads(); /* kv and p are the next tile's after this */
	}
	if (vd < dim)
		for (int hh = 0; hh < 4 && vh + hh < hg; hh++) {
			float *out = a.out + i * a.out_ld + (g * a.per_kv + vh + hh) * a.dim + vd;
			float l = sm->l[vh + hh];
			for (int d = 0; d < 4; d++)
				out[d] = acc[hh][d] / l;
		}
}

static bool aligned(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

extern "C" bool hbk_attn_float4(const struct hbk_attn *a)
{
	return a->stride % 4 == 0 && a->q_ld % 4 == 0 && a->qh_ld % 4 == 0 && a->out_ld % 4 == 0 && aligned(a->q) &&
	       aligned(a->K) && aligned(a->V) && aligned(a->out);
}

/* -1: the shape is not this kernel's (the caller takes the per-head kernel) */
extern "C" int hbk_attend_group(const struct hbk_attn *a)
{
	unsigned blocks;
	cudaError_t e;

	if (a->per_kv < 2 || a->per_kv > AG_HEADS || a->heads % a->per_kv || a->dim > AG_DIM || a->dim % 4 ||
	    !hbk_attn_float4(a))
		return -1;
	blocks = (unsigned)(a->nq * (a->heads / a->per_kv));
	if (!blocks)
		return 0;
	/* set each launch: a context made anew (hb_cuda_start after stop) starts without it */
	e = cudaFuncSetAttribute(attend_group_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
				 (int)sizeof(struct ag_smem));
	if (e != cudaSuccess)
		return (int)e;
	attend_group_kernel<<<blocks, AG_THREADS, sizeof(struct ag_smem)>>>(*a);
	return (int)cudaGetLastError();
}

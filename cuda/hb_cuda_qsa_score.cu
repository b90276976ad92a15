/*
 * hb_cuda_qsa_score.cu: the indexer's scores of a batch of queries against
 * the pooled groups on tiles (hbk_qsa_score_tiles), bit for bit the
 * scores of qsa_score_batch_kernel (hb_cuda_kern.cu), which
 * hbk_qsa_select_batch takes where this one does not fit.
 *
 * Why: that kernel gives one warp to each (query, group) and, for each of
 * 16 heads, four products a lane and five shuffles: it loads every query
 * head again for every group and spends more on the shuffles than on the
 * products (8.5 of a 145 ms chunk at T = 4,096 on an H100).
 *
 * The same sums: a score is sum over heads, from 0 in head order, of
 * relu(d_h), times 1/sqrt(dim), where d_h adds the 32 lanes' partials
 * p_l = fma chain over i = l, l + 32, ... (the first product innermost)
 * in the butterfly's tree: p_l + p_(l+16), those pairs 8 apart, then 4,
 * 2, 1.  Taken in bit-reversed lane order (0, 16, 8, 24, 4, ...) that
 * tree is the one a running binary counter builds, so a thread forms it
 * with a stack of five partial sums, for any number of (query, group)
 * pairs at once, from shared memory.
 *
 * A block: 16 queries by 64 groups, all heads; a thread: 2 queries by 2
 * groups.  The group keys are staged once, each query head in turn (the
 * next one copied in while the current one is scored), both as [row][lane]
 * [j] (element l + 32 j), so that a thread reads a lane's J terms as one
 * load.  A warp's lanes span 4 queries and 8 groups: 4 and 8 distinct
 * rows a load, in distinct banks.
 */
#include "hb_cuda_kern.h"
#include "hb_cuda_mma_int.cuh"

#include <cuda_runtime.h>

using hb_mma::cp_async4;
using hb_mma::cp_async_commit;
using hb_mma::cp_async_wait;

namespace {

constexpr int QT = 16, GT = 64, THREADS = 256;

template <int J> struct tiles {
	static constexpr int PITCH = 32 * J + 4; /* a staged row: 32 lanes of J terms, then 4 floats apart */
	static constexpr int Q_AT = 0, Q_BYTES = 2 * QT * PITCH * 4; /* two head slices */
	static constexpr int K_AT = Q_BYTES, BYTES = Q_AT + Q_BYTES + GT * PITCH * 4;
};

/* row r's dim floats at src into t's row r as [lane][j] (zeros where !valid) */
template <int J>
__device__ __forceinline__ void stage_row(float *t, int r, const float *src, bool valid, int e)
{
	int l = e % 32, j = e / 32;
	cp_async4(smem_u32(&t[r * tiles<J>::PITCH + l * J + j]), valid ? src + e : src, valid);
}

/* bit-reversed order of 0 .. 31 */
__device__ __forceinline__ constexpr int brev5(int m)
{
	return (m & 1) << 4 | (m & 2) << 2 | (m & 4) | (m & 8) >> 2 | (m & 16) >> 4;
}

template <int J>
__global__ void __launch_bounds__(THREADS) qsa_score_tiles_kernel(size_t nq, const float *iq, size_t iq_ld,
								   size_t heads, const float *pooled,
								   const uint64_t *groups, uint64_t most, float scale,
								   float *scores, size_t scores_ld)
{
	typedef tiles<J> TL;
	constexpr int DIM = 32 * J, P = TL::PITCH;
	extern __shared__ __align__(16) unsigned char smem[];
	float *sq = (float *)(smem + TL::Q_AT), *sk = (float *)(smem + TL::K_AT);
	__shared__ uint64_t reach;
	size_t q0 = (size_t)blockIdx.y * QT;
	uint64_t g0 = (uint64_t)blockIdx.x * GT;
	unsigned tid = threadIdx.x, lane = tid % 32, w = tid / 32;
	int lq = (int)(lane / 8), lg = (int)(lane % 8);
	int qr[2] = { (int)(w / 4) * 8 + lq, (int)(w / 4) * 8 + lq + 4 };  /* the thread's query rows */
	int gr[2] = { (int)(w % 4) * 16 + lg, (int)(w % 4) * 16 + lg + 8 }; /* and group rows */

	if (tid == 0) {
		uint64_t m = 0;
		for (size_t i = q0; i < q0 + QT && i < nq; i++)
			m = groups[i] > m ? groups[i] : m;
		reach = m;
	}
	__syncthreads();
	if (g0 >= reach) /* no query of the tile reaches these groups */
		return;
	for (int e = (int)tid; e < GT * DIM; e += THREADS) {
		int r = e / DIM;
		stage_row<J>(sk, r, pooled + (g0 + r) * DIM, g0 + r < most, e % DIM);
	}
	for (int e = (int)tid; e < QT * DIM; e += THREADS) {
		int r = e / DIM;
		stage_row<J>(sq, r, iq + (q0 + r) * iq_ld, q0 + r < nq, e % DIM);
	}
	cp_async_commit();

	float sc[2][2] = { { 0, 0 }, { 0, 0 } };
	for (size_t h = 0; h < heads; h++) {
		const float *qh = sq + (h % 2) * QT * P;
		if (h + 1 < heads) { /* the next head into the other slice */
			float *nx = sq + ((h + 1) % 2) * QT * P;
			for (int e = (int)tid; e < QT * DIM; e += THREADS) {
				int r = e / DIM;
				stage_row<J>(nx, r, iq + (q0 + r) * iq_ld + (h + 1) * DIM, q0 + r < nq, e % DIM);
			}
		}
		cp_async_commit();
		cp_async_wait<1>(); /* this head's slice (and the keys) */
		__syncthreads();
		float st[2][2][6];
#pragma unroll
		for (int m = 0; m < 32; m++) {
			const int l = brev5(m);
			float qv[2][J], kv[2][J];
#pragma unroll
			for (int a = 0; a < 2; a++)
#pragma unroll
				for (int j = 0; j < J; j++)
					qv[a][j] = qh[qr[a] * P + l * J + j], kv[a][j] = sk[gr[a] * P + l * J + j];
#pragma unroll
			for (int a = 0; a < 2; a++)
#pragma unroll
				for (int b = 0; b < 2; b++) {
					float v = 0;
#pragma unroll
					for (int j = 0; j < J; j++)
						v = fmaf(qv[a][j], kv[b][j], v);
					/* the counter's carries: the trailing ones of m */
					int lvl = 0;
#pragma unroll
					for (int c = m; c & 1; c >>= 1, lvl++)
						v = st[a][b][lvl] + v;
					st[a][b][lvl] = v;
				}
		}
#pragma unroll
		for (int a = 0; a < 2; a++)
#pragma unroll
			for (int b = 0; b < 2; b++) {
				float d = st[a][b][5];
				sc[a][b] += d > 0 ? d : 0;
			}
		__syncthreads(); /* this slice read before it is refilled */
	}
#pragma unroll
	for (int a = 0; a < 2; a++)
#pragma unroll
		for (int b = 0; b < 2; b++) {
			size_t i = q0 + (size_t)qr[a];
			uint64_t g = g0 + (uint64_t)gr[b];
			if (i < nq && g < groups[i])
				scores[i * scores_ld + g] = sc[a][b] * scale;
		}
}

template <int J>
int launch(size_t nq, const float *iq, size_t iq_ld, size_t heads, const float *pooled, const uint64_t *groups,
	   uint64_t most, float scale, float *scores, size_t scores_ld)
{
	cudaError_t e = cudaFuncSetAttribute(qsa_score_tiles_kernel<J>, cudaFuncAttributeMaxDynamicSharedMemorySize,
					     tiles<J>::BYTES);

	if (e != cudaSuccess)
		return (int)e;
	dim3 grid((unsigned)((most + GT - 1) / GT), (unsigned)((nq + QT - 1) / QT));
	qsa_score_tiles_kernel<J><<<grid, THREADS, tiles<J>::BYTES>>>(nq, iq, iq_ld, heads, pooled, groups, most,
									scale, scores, scores_ld);
	return (int)cudaGetLastError();
}

} /* namespace */

/* -1: a width this kernel is not built for (the caller takes the warp kernel) */
extern "C" int hbk_qsa_score_tiles(size_t nq, const float *iq, size_t iq_ld, size_t heads, size_t dim,
				   const float *pooled, const uint64_t *groups, uint64_t most, float scale,
				   float *scores, size_t scores_ld)
{
	if (!nq || !most || !heads)
		return 0;
	if (most > (uint64_t)65535 * GT || (nq + QT - 1) / QT > 65535)
		return -1;
	switch (dim) {
	case 64:
		return launch<2>(nq, iq, iq_ld, heads, pooled, groups, most, scale, scores, scores_ld);
	case 128:
		return launch<4>(nq, iq, iq_ld, heads, pooled, groups, most, scale, scores, scores_ld);
	default:
		return -1;
	}
}

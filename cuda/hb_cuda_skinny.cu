/*
 * hb_cuda_skinny.cu: y = W x for a weight of few rows (hbk_matmul_skinny:
 * the hyper-connections' injection, 4 rows; the shared expert's gate, 1;
 * the delta rule's gates, a row per value head).
 *
 * Why: the tiled kernels (hb_cuda_kern.cu's, the tensor-core ones) give a
 * block 64 or 128 weight rows; a weight of 4 rows leaves 15 of 16 (31 of
 * 32) of that work padding, and the few blocks along the rows each walk
 * every column.  Here a warp takes SK_TOK tokens and SK_ROWS rows at a
 * time, its lanes stride the columns with every partial sum in registers,
 * and the weights, a few rows, are read from cache by every warp.  Measured
 * on an H100 (bench/gpu-results.md): with two tokens a warp it lost to the
 * tiled kernels even at 4 rows (each weight read served two tokens), and at
 * 48 rows by 12x; so eight tokens a warp, and only up to 8 rows (one pass).
 *
 * Numerics: float32 products and sums, each lane's over its columns in
 * order, then the lanes' tree; the order differs from the tiled kernels',
 * the values by rounding only.
 */
#include "hb_cuda_kern.h"
#include "hb_cuda_widen.cuh"

#include <cuda_runtime.h>

#define SK_THREADS 128 /* four warps: a 4,096-token chunk fills 128 blocks */
#define SK_TOK 8  /* tokens a warp: each weight read serves eight */
#define SK_ROWS 8 /* rows a pass */

template <int TYPE>
__global__ void __launch_bounds__(SK_THREADS)
skinny_kernel(const uint8_t *__restrict__ W, uint64_t row_bytes, uint64_t rows, uint64_t cols,
	      const float *__restrict__ x, size_t T, float *__restrict__ y)
{
	unsigned lane = threadIdx.x % 32;
	size_t t0 = ((size_t)blockIdx.x * (SK_THREADS / 32) + threadIdx.x / 32) * SK_TOK;

	if (t0 >= T) /* no barrier below: a warp may leave */
		return;
	for (uint64_t r0 = 0; r0 < rows; r0 += SK_ROWS) {
		float acc[SK_TOK][SK_ROWS] = { { 0 } };
		for (uint64_t c = lane; c < cols; c += 32) {
			float xv[SK_TOK];
#pragma unroll
			for (int k = 0; k < SK_TOK; k++)
				xv[k] = t0 + k < T ? x[(t0 + k) * cols + c] : 0.0f;
#pragma unroll
			for (int r = 0; r < SK_ROWS; r++) {
				if (r0 + r >= rows)
					break;
				float w = widen<TYPE>(W + (r0 + r) * row_bytes, c);
#pragma unroll
				for (int k = 0; k < SK_TOK; k++)
					acc[k][r] = fmaf(w, xv[k], acc[k][r]);
			}
		}
#pragma unroll
		for (int k = 0; k < SK_TOK; k++)
#pragma unroll
			for (int r = 0; r < SK_ROWS; r++) {
				float v = acc[k][r];
				for (int off = 16; off; off >>= 1)
					v += __shfl_xor_sync(0xffffffffu, v, off);
				if (lane == 0 && t0 + k < T && r0 + r < rows)
					y[(t0 + k) * rows + r0 + r] = v;
			}
	}
}

extern "C" int hbk_matmul_skinny(int type, const void *W, uint64_t row_bytes, uint64_t rows, uint64_t cols,
				 const float *x, size_t T, float *y)
{
	size_t per = (SK_THREADS / 32) * SK_TOK;
	unsigned grid = (unsigned)((T + per - 1) / per);
	const uint8_t *w = (const uint8_t *)W;

	if (!T || !rows)
		return 0;
	switch (type) {
	case HBK_F32: skinny_kernel<HBK_F32><<<grid, SK_THREADS>>>(w, row_bytes, rows, cols, x, T, y); break;
	case HBK_F16: skinny_kernel<HBK_F16><<<grid, SK_THREADS>>>(w, row_bytes, rows, cols, x, T, y); break;
	case HBK_BF16: skinny_kernel<HBK_BF16><<<grid, SK_THREADS>>>(w, row_bytes, rows, cols, x, T, y); break;
	case HBK_AFFINE4_G64:
		skinny_kernel<HBK_AFFINE4_G64><<<grid, SK_THREADS>>>(w, row_bytes, rows, cols, x, T, y);
		break;
	default: return (int)cudaErrorInvalidValue;
	}
	return (int)cudaGetLastError();
}

/*
 * hb_cuda_online.cuh: one step of the online softmax over a tile of 32
 * scores held one a lane by a warp (hb_cuda_attn.cu, hb_cuda_attn_mma.cu):
 * the running maximum and sum of one head kept in shared memory, and the
 * factor the head's accumulated values are to be scaled by.
 */
#ifndef HB_CUDA_ONLINE_CUH
#define HB_CUDA_ONLINE_CUH

#include <math.h>

/* lane's weight e^(s - max) for score s (-inf: masked, weight 0); lane 0
 * updates *m and *l and sets *corr = e^(old max - new max) */
__device__ __forceinline__ float online_step(float s, float *m, float *l, float *corr, int lane)
{
	float mx = s, sum, mo = *m, mn, e;

	for (int off = 16; off; off >>= 1)
		mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
	mn = fmaxf(mo, mx);
	e = s == -INFINITY ? 0 : expf(s - mn);
	sum = e;
	for (int off = 16; off; off >>= 1)
		sum += __shfl_xor_sync(0xffffffffu, sum, off);
	if (lane == 0) {
		float c = mo == -INFINITY ? 0 : expf(mo - mn);
		*corr = c, *l = *l * c + sum, *m = mn;
	}
	return e;
}

#endif

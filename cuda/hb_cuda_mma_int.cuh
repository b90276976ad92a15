/*
 * hb_cuda_mma_int.cuh: what the two forms of the tensor-core products
 * share (hb_cuda_mma.cu, mma.sync on any sm_90 or later device;
 * hb_cuda_wgmma.cu, wgmma on sm_90 itself): a launch's arguments, the
 * step of 64 columns (one affine4 group), the asynchronous copies, and
 * the wgmma form's entry.
 */
#ifndef HB_CUDA_MMA_INT_CUH
#define HB_CUDA_MMA_INT_CUH

#include "hb_cuda_mma_ops.cuh"

#include <cuda_bf16.h>
#include <stddef.h>
#include <stdint.h>

namespace hb_mma {

constexpr int BK = 64; /* columns per step */

struct Args {
	const uint8_t *W;                /* the product's weights ... */
	const uint8_t *const *Wg;        /* ... or the groups' (device array) */
	uint64_t row_bytes, rows, cols;
	const float *x;
	size_t T;                        /* tokens (ungrouped) */
	float *y;
	const int32_t *off;              /* group offsets (grouped) */
	bool vec_x, vec_w;               /* whether wide loads are aligned */
	/* a second product on the same x: blocks from tx1 on multiply W2
	 * (grouped: the groups' Wg2) into y2 (NULL: none) */
	const uint8_t *W2;
	const uint8_t *const *Wg2;
	uint64_t row_bytes2, rows2, tx1;
	float *y2;
	bool vec_w2;
	/* x split beforehand (PRE): NT planes of [rows][colsp] bf16, plane
	 * elements apart, and [rows][cols / 64] sums (affine4) */
	const __nv_bfloat16 *xp;
	const float *xsum;
	uint64_t colsp;
	size_t plane;
	/* grouped, from a split: packed row j (a group's token) is the
	 * split's row xrow[j] / xk (xrow NULL: row j) */
	const int32_t *xrow;
	size_t xk;
};

/* the split's row of a group's token t (xrow already at the group) */
static __device__ __forceinline__ size_t split_row(const int32_t *xrow, size_t xk, size_t t)
{
	return xrow ? (size_t)xrow[t] / xk : t;
}

/* 16 bytes global -> shared, or 16 zero bytes where !valid (src unread) */
static __device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool valid)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

static __device__ __forceinline__ void cp_async4(uint32_t dst, const void *src, bool valid)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
}

static __device__ __forceinline__ void cp_async_wait_all()
{
	asm volatile("cp.async.wait_all;\n" ::: "memory");
}

/* the copies issued since the last commit, as one group */
static __device__ __forceinline__ void cp_async_commit()
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* until at most N committed groups are outstanding (groups complete in order) */
template <int N> static __device__ __forceinline__ void cp_async_wait()
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* an affine4 word of eight nibbles (byte j: weight 2j in the low nibble,
 * 2j + 1 in the high) as eight bf16 q - 8: 0x4300 | q is the bf16 128 + q,
 * less 136 exactly.  Output word j is byte j of the low nibbles and byte j
 * of the high ones, each followed by a zero byte (prmt's default mode,
 * whose selector bit 3 copies the sign bit of a byte under 0x10;
 * __byte_perm ignores that bit) */
static __device__ __forceinline__ uint4 a4_word_bf16(uint32_t v)
{
	const uint32_t lo = v & 0x0f0f0f0fu, hi = (v >> 4) & 0x0f0f0f0fu;
	uint32_t o[4];

#pragma unroll
	for (int j = 0; j < 4; j++) {
		uint32_t u;
		asm("prmt.b32 %0, %1, %2, %3;" : "=r"(u) : "r"(lo), "r"(hi), "r"(j | (8 | j) << 4 | (4 + j) << 8 | (12 + j) << 12));
		u |= 0x43004300u;
		o[j] = bits(__hsub2(bf2(u), bf2(0x43084308u)));
	}
	return make_uint4(o[0], o[1], o[2], o[3]);
}

/* a group's last word, scale | bias << 16 (bf16 each), as (scale,
 * bias + 8 scale): 8 scale is exact, so one rounding */
static __device__ __forceinline__ float2 a4_scale_bias(uint32_t v)
{
	float s = __uint_as_float(v << 16), b = __uint_as_float(v & 0xffff0000u);

	return make_float2(s, __fadd_rn(b, 8.0f * s));
}

/*
 * The products of Args on sm_90's warpgroup instructions (hb_cuda_wgmma.cu)
 * for the split launchers: x split beforehand, two terms.  m: the tokens
 * of the tallest group (ungrouped: all); mean: the mean group's (ungrouped:
 * all).  Returns the launch's cudaError_t, or -1 where this form does not
 * take the launch (another device, three terms, turned off): the caller
 * then runs the mma.sync form.
 */
int wg_go(int type, int terms, const Args &a, size_t m, size_t mean, size_t groups, bool grouped);

} /* namespace hb_mma */

#endif

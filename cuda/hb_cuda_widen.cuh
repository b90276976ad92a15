/*
 * hb_cuda_widen.cuh: one weight of a row as float32, widened as the CPU
 * reference widens it (bf16 and f16 exactly; affine4-g64 as scale * q +
 * bias, the product exact and the sum rounded once).  For the kernels
 * that read weights element by element (hb_cuda_kern.cu, hb_cuda_skinny.cu).
 */
#ifndef HB_CUDA_WIDEN_CUH
#define HB_CUDA_WIDEN_CUH

#include "hb_cuda_kern.h"

#include <cuda_fp16.h>
#include <stdint.h>

template <int TYPE>
__device__ __forceinline__ float widen(const uint8_t *row, uint64_t c)
{
	if (TYPE == HBK_F32)
		return reinterpret_cast<const float *>(row)[c];
	if (TYPE == HBK_BF16) {
		uint16_t b = reinterpret_cast<const uint16_t *>(row)[c];
		return __uint_as_float((uint32_t)b << 16);
	}
	if (TYPE == HBK_F16)
		return __half2float(reinterpret_cast<const __half *>(row)[c]);
	/* affine4-g64: 32 nibble bytes (weight 2k low, 2k+1 high), bf16 scale, bf16 bias */
	const uint8_t *p = row + (c / 64) * 36;
	uint32_t k = (uint32_t)(c % 64);
	uint32_t q = (p[k / 2] >> ((k & 1) * 4)) & 0x0fu;
	float scale = __uint_as_float((uint32_t)(p[32] | p[33] << 8) << 16);
	float bias = __uint_as_float((uint32_t)(p[34] | p[35] << 8) << 16);
	return __fadd_rn(__fmul_rn(scale, (float)q), bias);
}

#endif
